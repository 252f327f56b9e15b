"""Issue #8 item J(a): a process paused while it holds SQLite's write lock.

SQLite cannot break another process's lock, so every writer on the file waits. What the store
can do is give up within its busy timeout with a ``StoreUnavailable`` that says what is going
on (readers go on: WAL), instead of hanging or reporting a bare "database is locked".
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.sqlite import _procs
from tether._errors import StoreUnavailable
from tether.stores import Lease, NewJob, Outcome
from tether.stores._sqlite.store import SQLiteStore

BUSY = 0.5


@pytest.fixture
def paused_writer(sqlite_store: SQLiteStore, tmp_path: Path) -> Iterator[int]:
    """A helper process that holds the write lock, then SIGSTOPped; yields its pid."""
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_procs.hold_write_lock, args=(str(tmp_path / "tether.db"), ready))
    proc.start()
    try:
        assert ready.wait(60), "the helper never took the write lock"
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGSTOP)
        yield proc.pid
    finally:
        if proc.pid is not None and proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
            os.kill(proc.pid, signal.SIGCONT)
        proc.join(30)


@pytest.mark.slow
@pytest.mark.crash
def test_paused_lock_holder_gives_store_unavailable_naming_the_lock(
    make_store: Callable[..., SQLiteStore], paused_writer: int
) -> None:
    store = make_store(busy_timeout=BUSY)
    stale = Lease(1, 1, "w", "x:1")
    calls: dict[str, Callable[[], object]] = {
        "claim": lambda: store.claim("w", ["default"], 1, 30.0),
        "heartbeat": lambda: store.heartbeat("w", [], 30.0),
        "enqueue": lambda: store.enqueue([NewJob("t")]),
        "finish": lambda: store.finish([Outcome(stale, "done", result="1")]),
        "reap": store.reap_expired,
    }
    for name, call in calls.items():
        start = time.monotonic()
        with pytest.raises(StoreUnavailable) as info:
            call()
        elapsed = time.monotonic() - start
        message = str(info.value)
        assert "write lock" in message and "paused" in message, (name, message)
        assert "busy_timeout" in message or f"{BUSY:g}" in message, (name, message)
        assert elapsed < BUSY + 3.0, (name, elapsed)
    # Readers are not blocked (WAL): inspection keeps working.
    assert store.list_jobs() == []
    assert store.counts() == []
