"""Store kinds served through a tether server: ``remote-sqlite``, ``remote-postgres``,
``remote-redis`` (issue #21).

A test of such a kind talks ``tether://`` to an in-process :class:`TetherServer` in front of
an isolated store of the base kind (its own file, schema or prefix, as tests/servers.py
makes). The server trusts the client's ``now=`` (``trust_client_clock``: the contract suite
drives time through it; a production server never does). ``base_kind`` maps a remote kind
back to the store behind it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.pg_template import clone_for_url
from tests.servers import isolated_url
from tether._server.serve import TetherServer
from tether.stores import open_store

REMOTE_KINDS = ("remote-sqlite", "remote-postgres", "remote-redis")
PREFIX = "remote-"


def is_remote(kind: str) -> bool:
    return kind.startswith(PREFIX)


def base_kind(kind: str) -> str:
    """``remote-postgres`` -> ``postgres``; other kinds unchanged."""
    return kind.removeprefix(PREFIX)


#: The URL of the store behind each served ``tether://`` URL (while it is served).
BACKING: dict[str, str] = {}


@contextmanager
def served_url(kind: str, tmp_path: Path) -> Iterator[str]:
    """A ``tether://`` URL served in front of a fresh store of ``base_kind(kind)``, not
    migrated (as a direct store's URL: the ``store`` fixture migrates, through the server);
    the server stops and the store closes afterwards."""
    with isolated_url(base_kind(kind), tmp_path) as url:
        backing = open_store(url)
        try:
            server = TetherServer(backing, trust_client_clock=True, max_workers=16)
            served = f"tether://127.0.0.1:{server.start()}"
            BACKING[served] = url
            try:
                yield served
            finally:
                del BACKING[served]
                server.stop(grace=1.0)
        finally:
            backing.close()


def clone_backing(kind: str, url: str) -> None:
    """What tests/conftest.py's ``store`` does for PostgreSQL (clone a migrated template,
    so that migrate only checks), for the store behind a served URL."""
    if base_kind(kind) == "postgres" and url in BACKING:
        clone_for_url(BACKING[url])
