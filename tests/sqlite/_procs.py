"""Entry points for the multi-process tests (spawned children import this module)."""

from __future__ import annotations

from typing import Any

from tether.stores import Outcome
from tether.stores._sqlite.store import SQLiteStore


def drain(url: str, owner: str, barrier: Any, results: Any) -> None:
    """Claim in small batches until the queue is empty; release a job back while its attempt is
    below 3 (so jobs are re-claimed, by anyone), else finish it done. Report every claim."""
    store = SQLiteStore(url)
    claimed: list[tuple[int, int]] = []
    try:
        barrier.wait(60)
        while True:
            jobs = store.claim(owner, ["default"], 7, 300.0)
            if not jobs:
                break
            claimed.extend((job.id, job.attempt) for job in jobs)
            outcomes = [
                Outcome(job.lease, "released" if job.attempt < 3 and job.id % 2 else "done")
                for job in jobs
            ]
            rejected = store.finish(outcomes)
            assert not rejected, rejected
        results.put((owner, claimed, None))
    except BaseException as exc:
        results.put((owner, claimed, repr(exc)))
    finally:
        store.close()


def migrate(url: str, barrier: Any, results: Any) -> None:
    store = SQLiteStore(url)
    try:
        barrier.wait(60)
        results.put((store.migrate(), None))
    except BaseException as exc:
        results.put((None, repr(exc)))
    finally:
        store.close()


def hold_write_lock(path: str, ready: Any) -> None:
    """Take SQLite's write lock and keep it, mid-transaction, like a worker paused inside a
    write (the test SIGSTOPs this process once ``ready`` is set)."""
    import sqlite3
    import time

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE workers SET last_seen = last_seen")
    ready.set()
    while True:
        time.sleep(1)
