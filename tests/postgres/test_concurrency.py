"""Many claimers and reapers at once on one schema: no double grants, one end state."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from tether.stores import JobRecord, NewJob, Reaped
from tether.stores._postgres.store import PostgresStore

T = TypeVar("T")


def _together(calls: list[Callable[[], T]]) -> list[T]:
    barrier = threading.Barrier(len(calls))
    results: list[T | None] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        results[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(result is not None for result in results)
    return [result for result in results if result is not None]


def test_concurrent_claimers_never_share_a_job(
    pg: PostgresStore, open_pg: Callable[..., PostgresStore]
) -> None:
    pg.enqueue([NewJob("t", queue=q) for q in ("a", "b") for _ in range(300)])
    stores = [open_pg() for _ in range(6)]

    def drain(store: PostgresStore, owner: str) -> Callable[[], list[JobRecord]]:
        def run() -> list[JobRecord]:
            got: list[JobRecord] = []
            while batch := store.claim(owner, ["a", "b"], 7, 30):
                got.extend(batch)
            return got

        return run

    results = _together([drain(s, f"w{i}") for i, s in enumerate(stores)])
    ids = [job.id for got in results for job in got]
    assert len(ids) == len(set(ids)) == 600
    assert all(job.attempt == 1 and job.status == "running" for got in results for job in got)


def test_concurrent_reapers_reach_one_end_state(
    pg: PostgresStore, open_pg: Callable[..., PostgresStore]
) -> None:
    t0 = pg.now()
    pg.enqueue([NewJob("t", max_stalls=2) for _ in range(200)], now=t0)
    claimed = pg.claim("w", ["default"], 200, 10, now=t0)
    stores = [open_pg() for _ in range(4)]

    def reaper(store: PostgresStore) -> Callable[[], list[Reaped]]:
        return lambda: store.reap_expired(now=t0 + 60, limit=37)

    reaps = _together([reaper(s) for s in stores])
    while more := pg.reap_expired(now=t0 + 60, limit=1000):
        reaps.append(more)
    reaped: list[Reaped] = [r for batch in reaps for r in batch]
    assert sorted(r.job_id for r in reaped) == sorted(job.id for job in claimed)
    assert {(r.status, r.stall_count, r.owner, r.attempt) for r in reaped} == {
        ("pending", 1, "w", 1)
    }
    assert all(job.status == "pending" and job.stall_count == 1 for job in pg.list_jobs(limit=500))


def test_close_while_waiting_does_not_hang(pg: PostgresStore) -> None:
    pg.wait_for_jobs(["x"], 0.01)
    out: list[object] = []

    def wait() -> None:
        try:
            out.append(pg.wait_for_jobs(["x"], 3.0))
        except Exception as exc:
            out.append(exc)

    thread = threading.Thread(target=wait)
    thread.start()
    threading.Event().wait(0.1)
    pg.close()
    thread.join(5)
    assert not thread.is_alive()
