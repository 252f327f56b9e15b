"""SQLite's signal wait (issue #22) reads the database only when a signal may have come.

Another process's cancel or pause reaches a waiting worker through the signal stamp
(``<database>-live/signals``, signal_stamp.py); every other commit (a drain's claims and
finishes, enqueues) leaves the stamp alone, so a waiting worker reads nothing for it. Before
the stamp, every foreign commit cost each waiting worker two reads per poll: 20 idle workers
beside a drain read 800 times a second for signals that never came.

Another store object on the same file stands for another process: its commits are foreign to
the waiter's connection, and its cancel does not go through the waiter's in-process wake.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tests.contract.helpers import fresh_queue, running_job
from tether.stores import NewJob
from tether.stores._sqlite.store import SQLiteStore

LONG = 20.0


def test_another_processs_cancel_signals_the_holder(
    sqlite_store: SQLiteStore, make_store: Callable[..., SQLiteStore]
) -> None:
    other = make_store()
    job = running_job(sqlite_store, sqlite_store.now(), ttl=30)
    assert sqlite_store.wait_for_signal("w1", LONG) is True  # the baseline
    assert other.cancel(job.id) == "requested"
    assert sqlite_store.wait_for_signal("w1", LONG) is True
    assert sqlite_store.wait_for_signal("w1", 0.2) is False  # consumed


def test_another_processs_pause_signals_every_worker(
    sqlite_store: SQLiteStore, make_store: Callable[..., SQLiteStore]
) -> None:
    other = make_store()
    assert sqlite_store.wait_for_signal("w1", LONG) is True
    assert sqlite_store.wait_for_signal("w2", LONG) is True
    assert other.pause_queue(fresh_queue()) is True
    assert sqlite_store.wait_for_signal("w1", LONG) is True
    assert sqlite_store.wait_for_signal("w2", LONG) is True


def test_commits_that_signal_nothing_cost_the_waiter_no_read(
    sqlite_store: SQLiteStore, make_store: Callable[..., SQLiteStore]
) -> None:
    other = make_store()
    running_job(sqlite_store, sqlite_store.now(), ttl=30)
    assert sqlite_store.wait_for_signal("w1", LONG) is True
    statements: list[str] = []
    # The waiter's own connection (this thread's): every statement it runs is traced.
    sqlite_store._db.get().set_trace_callback(statements.append)
    stop = threading.Event()
    commits = [0]

    def write() -> None:  # another process's commits, none of them a cancel or a pause
        queue = fresh_queue()
        while not stop.is_set():
            other.enqueue([NewJob("t", queue=queue)])
            commits[0] += 1

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        while commits[0] < 20:  # commits during the wait below, too
            assert sqlite_store.wait_for_signal("w1", 0.2) is False
    finally:
        stop.set()
        writer.join(LONG)
        sqlite_store._db.get().set_trace_callback(None)
    assert not statements, f"{len(statements)} statements for {commits[0]} foreign commits"
