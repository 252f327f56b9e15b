from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import STORE_KINDS, isolated_url
from tether.stores import open_store
from tether.stores.base import Store


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def store_url(store_kind: str, tmp_path: Path) -> Iterator[str]:
    with isolated_url(store_kind, tmp_path) as url:
        yield url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    s.migrate()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def open_another(store_url: str) -> Iterator[object]:
    """Open more connections to the same store (for concurrency tests)."""
    opened: list[Store] = []

    def _open() -> Store:
        s = open_store(store_url)
        opened.append(s)
        return s

    yield _open
    for s in opened:
        s.close()
