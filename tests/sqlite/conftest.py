from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tether.stores._sqlite.store import SQLiteStore


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'tether.db'}"


@pytest.fixture
def make_store(db_url: str) -> Iterator[Callable[..., SQLiteStore]]:
    """Open more SQLiteStore objects on the test's file; all closed at teardown."""
    opened: list[SQLiteStore] = []

    def _make(**options: float) -> SQLiteStore:
        store = SQLiteStore(db_url, **options)
        opened.append(store)
        return store

    yield _make
    for store in opened:
        store.close()


@pytest.fixture
def sqlite_store(make_store: Callable[..., SQLiteStore]) -> SQLiteStore:
    store = make_store()
    store.migrate()
    return store
