"""A 10,000-job batch enqueue and a batched claim + finish drain, end to end. Speed is
measured by the benchmark (bench/), never asserted by a timed unit test."""

from __future__ import annotations

import pytest

from tether.stores import NewJob, Outcome
from tether.stores._postgres.store import PostgresStore

pytestmark = pytest.mark.slow


def test_enqueue_batch_and_claim_finish_loop(pg: PostgresStore) -> None:
    batch = [NewJob("t", payload='[[1], {"k": "v"}]') for _ in range(10_000)]
    pg.enqueue(batch[:10])
    ids = pg.enqueue(batch)
    assert ids == sorted(ids) and len(set(ids)) == len(batch)

    done = 0
    while jobs := pg.claim("w", ["default"], 100, 30):
        assert pg.finish([Outcome(job.lease, "done", result="1") for job in jobs]) == []
        done += len(jobs)
    assert done == len(batch) + 10
