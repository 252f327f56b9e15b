"""Issue #8 item J(b): the database file deleted or replaced under an open store.

Workers used to carry on against the deleted inode while producers created a new file whose
jobs never ran. The store now compares the path's (device, inode) with the file it opened and
raises StoreGone, naming the path.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tether._errors import StoreGone
from tether.stores import NewJob
from tether.stores._sqlite.store import SQLiteStore


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@pytest.fixture
def open_store(make_store: Callable[..., SQLiteStore]) -> SQLiteStore:
    store = make_store(file_check_interval=0.0)
    store.migrate()
    store.enqueue([NewJob("t")])
    return store


def test_deleted_file_is_store_gone(open_store: SQLiteStore, tmp_path: Path) -> None:
    db = tmp_path / "tether.db"
    _remove(db)
    with pytest.raises(StoreGone, match=str(db)):
        open_store.claim("w", ["default"], 1, 30.0)
    with pytest.raises(StoreGone, match="deleted"):
        open_store.heartbeat("w", [], 30.0)
    with pytest.raises(StoreGone):
        open_store.wait_for_jobs(["default"], 0.5)
    assert not db.exists(), "a new thread's connection must not create a fresh file"


def test_replaced_file_is_store_gone(open_store: SQLiteStore, tmp_path: Path) -> None:
    db = tmp_path / "tether.db"
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE x (y)")
    conn.close()
    os.replace(other, db)
    with pytest.raises(StoreGone, match="replaced"):
        open_store.heartbeat("w", [], 30.0)
    with pytest.raises(StoreGone):
        open_store.enqueue([NewJob("t")])


def test_a_copy_moved_back_in_place_is_still_gone(open_store: SQLiteStore, tmp_path: Path) -> None:
    """Restoring a backup creates a new inode: the store's handle no longer sees the file."""
    db = tmp_path / "tether.db"
    shutil.copy(db, tmp_path / "backup.db")
    _remove(db)
    os.replace(tmp_path / "backup.db", db)
    with pytest.raises(StoreGone):
        open_store.claim("w", ["default"], 1, 30.0)


@pytest.mark.slow
def test_default_check_notices_within_about_a_second(
    make_store: Callable[..., SQLiteStore], tmp_path: Path
) -> None:
    store = make_store()
    store.migrate()
    store.claim("w", ["default"], 1, 30.0)
    _remove(tmp_path / "tether.db")
    deadline = time.monotonic() + 5.0
    with pytest.raises(StoreGone):
        while time.monotonic() < deadline:
            store.claim("w", ["default"], 1, 30.0)
            time.sleep(0.05)


def test_the_file_in_place_is_fine(open_store: SQLiteStore) -> None:
    for _ in range(3):
        assert len(open_store.claim("w", ["default"], 1, 30.0)) <= 1
        open_store.heartbeat("w", [], 30.0)
