"""The PostgreSQL limited claim (the server function of migration 0007) chooses exactly what
the shared Python bookkeeping (:mod:`tether.stores._flow`, the memory store's claim) chooses,
step by step, on random jobs, limits and claims.

``tests/contract/test_flow.py`` holds every store to the rules (concurrency limits spelled out
literally); this adds what it leaves out and the function's own shortcuts must survive: rate
limits per key and per task next to concurrency ones, queue limits, jobs not due yet, jobs
without a key whose group has room for several, several priorities, and claims of many and
of few (the function offers each group's first job first and reads further only when the
rules need it).
"""

from __future__ import annotations

import random

import pytest

from tests.contract.helpers import new_job
from tether.stores import FlowLimit, Outcome, Store
from tether.stores._memory.store import MemoryStore
from tether.stores._postgres.store import PostgresStore

T0 = 1_000_000.0
FLOWS = [
    [FlowLimit("task", "a", concurrency=2, per_key=True)],
    [FlowLimit("task", "a", rate=3, per=5.0, per_key=True)],
    [FlowLimit("task", "a", concurrency=3, per_key=True), FlowLimit("task", "a", rate=7, per=4.0),
     FlowLimit("task", "b", concurrency=4), FlowLimit("queue", "q2", concurrency=9)],
    [FlowLimit("task", "b", rate=4, per=3.0, per_key=True),
     FlowLimit("task", "b", rate=9, per=9.0, per_key=True),  # one start log, two windows
     FlowLimit("queue", "q1", rate=12, per=6.0)],
    [FlowLimit("task", "c", concurrency=1, per_key=True),
     FlowLimit("task", "a", per_key=True),  # neither a concurrency nor a rate
     FlowLimit("task", "c", concurrency=5)],
    [FlowLimit("task", "a", concurrency=50, per_key=True),
     FlowLimit("task", "b", concurrency=50, per_key=True)],
]


def _running(store: Store, pos: dict[int, int]) -> list[int]:
    return sorted(pos[j.id] for j in store.list_jobs(status="running", limit=10_000))


# Seeds under which each shortcut, broken on purpose (an exactness condition dropped), made
# this test fail; each condition fails under at least one of them.
@pytest.mark.parametrize("seed", [1, 12])
def test_the_function_chooses_as_the_python_bookkeeping(pg: PostgresStore, seed: int) -> None:
    rng = random.Random(seed)
    ref = MemoryStore()
    ref.migrate()
    stores: tuple[Store, Store] = (ref, pg)
    # job id -> position in enqueue order, per store: positions are what the two compare
    pos: tuple[dict[int, int], dict[int, int]] = ({}, {})

    def add(n: int, now: float) -> None:
        # Each batch has a mix of its own: one priority or several (a rare urgent one), many
        # keys or few or one hot key (its jobs fill the first reads of a queue), jobs without
        # a key, some not due yet.
        prios = rng.choice([[0], [0, 1], [-1] + [0] * 8 + [1]])
        keys = rng.choice([[None, "", "k1", "k2"], [None, *(f"k{i}" for i in range(12))],
                           ["hot"] * 12 + [None, "", "k1", "k2"]])
        jobs = [new_job(rng.choice(["a", "b", "c"]), queue=rng.choice(["q1", "q2"]),
                        priority=rng.choice(prios), limit_key=rng.choice(keys),
                        run_at=now + rng.uniform(-20.0, 10.0)) for _ in range(n)]
        for store, ids in zip(stores, pos, strict=True):
            ids.update((job_id, len(ids) + i)
                       for i, job_id in enumerate(store.enqueue(jobs, now=now)))

    try:
        now = T0
        add(300, now)  # a backlog, so that claims of a few fill up before its end
        for step in range(240):
            if step % 4 == 0:  # and new jobs keep coming
                add(30, now)
            # Not a round step: a start exactly one window old is in or out by a float's last
            # bit in Python and by a microsecond rounding on the server.
            now += rng.choice([0.2, 0.5, 1.0, 2.5]) + rng.uniform(0.001, 0.01)
            flow = rng.choice(FLOWS)
            limit = rng.choice([1, 2, 3, 5, 8, 13, 40])
            queues = rng.choice([["q1"], ["q2"], ["q1", "q2"], ["q2", "q1"]])
            got = [sorted(ids[j.id] for j in store.claim("w", queues, limit, 1e6, now=now,
                                                          flow=flow))
                   for store, ids in zip(stores, pos, strict=True)]
            assert got[1] == got[0], (step, queues, limit, flow)
            running = _running(ref, pos[0])
            assert _running(pg, pos[1]) == running
            done = set(rng.sample(running, rng.randint(0, len(running))))
            for store, ids in zip(stores, pos, strict=True):
                leases = [j.lease for j in store.list_jobs(status="running", limit=10_000)
                          if ids[j.id] in done]
                assert store.finish([Outcome(lease, "done", result="1") for lease in leases],
                                    now=now) == []
    finally:
        ref.close()


def test_a_queue_read_in_part_hides_no_job_that_comes_first(pg: PostgresStore) -> None:
    """Two queues: the first jobs of q2 are all of a key at its limit, and a job of another
    key waits behind them, earlier than any job of q1. The claim reads only the first jobs of
    each queue at first; the job behind is still the first one the rules take."""
    flow = [FlowLimit("task", "a", concurrency=1, per_key=True)]
    pg.enqueue([new_job("a", queue="q2", limit_key="big", run_at=T0 + i) for i in range(40)]
               + [new_job("a", queue="q2", limit_key="small", run_at=T0 + 50)]
               + [new_job("a", queue="q1", limit_key=f"x{i}", run_at=T0 + 60 + i)
                  for i in range(5)], now=T0)
    (big,) = pg.claim("w", ["q2"], 1, 1e6, now=T0 + 100, flow=flow)
    assert big.limit_key == "big"
    got = pg.claim("w", ["q1", "q2"], 2, 1e6, now=T0 + 100, flow=flow)
    assert [j.limit_key for j in got] == ["small", "x0"]
