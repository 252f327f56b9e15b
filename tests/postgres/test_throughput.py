"""Rough throughput floors (loose, so a busy CI machine does not flake; the targets are
30,000 jobs/s for a 10,000 batch enqueue, which a quiet machine beats ~3x)."""

from __future__ import annotations

import time

import pytest

from tether.stores.base import NewJob, Outcome
from tether.stores.postgres.store import PostgresStore

pytestmark = pytest.mark.slow


def test_enqueue_batch_and_claim_finish_loop(pg: PostgresStore) -> None:
    batch = [NewJob("t", payload='[[1], {"k": "v"}]') for _ in range(10_000)]
    pg.enqueue(batch[:10])
    started = time.perf_counter()
    ids = pg.enqueue(batch)
    enqueue_rate = len(batch) / (time.perf_counter() - started)
    assert ids == sorted(ids) and len(set(ids)) == len(batch)

    started = time.perf_counter()
    done = 0
    while jobs := pg.claim("w", ["default"], 100, 30):
        assert pg.finish([Outcome(job.lease, "done", result="1") for job in jobs]) == []
        done += len(jobs)
    loop_rate = done / (time.perf_counter() - started)
    assert done == len(batch) + 10
    print(f"\nenqueue 10k: {enqueue_rate:,.0f} jobs/s; claim+finish: {loop_rate:,.0f} jobs/s")
    assert enqueue_rate > 10_000
    assert loop_rate > 3_000
