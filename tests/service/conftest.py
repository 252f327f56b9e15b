"""Fixtures for the tether server's own tests: a server in front of a fresh SQLite store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tether._server.auth import Authorizer, Tokens
from tether._server.serve import TetherServer
from tether.stores import Store, open_store

WORKER_TOKEN = "w-secret-token-1"
ADMIN_TOKEN = "a-secret-token-2"


@pytest.fixture
def backing(tmp_path: Path) -> Iterator[Store]:
    store = open_store(f"sqlite:///{tmp_path / 'server.db'}")
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def serve(backing: Store, tmp_path: Path) -> Iterator[Callable[..., TetherServer]]:
    """``serve(**options)``: a started TetherServer in front of ``backing`` (stopped after
    the test). ``tokens=True`` gives it a token file with WORKER_TOKEN and ADMIN_TOKEN."""
    made: list[TetherServer] = []

    def _serve(tokens: bool = False, **options: object) -> TetherServer:
        if tokens:
            path = tmp_path / "tokens"
            path.write_text(f"{WORKER_TOKEN} worker\n{ADMIN_TOKEN} admin\n", encoding="utf-8")
            options["authorizer"] = Authorizer(Tokens.load(str(path)))
        server = TetherServer(backing, **options)  # type: ignore[arg-type]
        server.start()
        made.append(server)
        return server

    yield _serve
    for server in made:
        server.stop(grace=1.0)


@pytest.fixture
def remote() -> Iterator[Callable[[str], Store]]:
    """``remote(url)``: a tether:// store, closed after the test."""
    opened: list[Store] = []

    def _open(url: str) -> Store:
        store = open_store(url)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()
