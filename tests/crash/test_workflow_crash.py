"""Workflows across real worker processes (issue #20): a random DAG of 60 jobs run by three
``tether worker`` processes (one of them a process pool), two of which are SIGKILLed mid-run
and replaced.

What must hold, read from the handlers' own start/end records (tests/crash/workflow_app.py)
and the store: every job ends done; no attempt of a job started before each of its parents'
successful attempt (the one the store kept as done) had ended; each job's successful attempt
ran to its end once; and each job was given its parents' results, in ``after`` order.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest

from tests.crash.harness import Cluster, all_in, held_by, result_of, wait_for
from tests.crash.workflow_app import step
from tether.stores import Store

APP = "tests.crash.workflow_app:app"
JOBS = 60
pytestmark = [pytest.mark.crash, pytest.mark.timeout(240)]


def random_dag(rng: random.Random, n: int) -> list[list[int]]:
    """Parents (indexes) of each of ``n`` jobs: 0 to 3 among the 12 before it, so the DAG
    has fan-in, fan-out and some depth."""
    out: list[list[int]] = []
    for i in range(n):
        window = list(range(max(0, i - 12), i))
        out.append(sorted(rng.sample(window, min(len(window), rng.choice((0, 1, 1, 2, 3))))))
    return out


def done_count(store: Store, ids: list[int]) -> int:
    return sum(1 for j in store.get_jobs(ids) if j.status == "done")


def test_a_random_dag_survives_sigkilled_workers(cluster: Cluster, store: Store) -> None:
    rng = random.Random(20)
    dag = random_dag(rng, JOBS)
    workers = [cluster.spawn(4, app=APP), cluster.spawn(4, app=APP),
               cluster.spawn(3, "--pool", "process", app=APP)]
    cluster.wait_registered(store, *workers)
    ids: list[int] = []
    for parents in dag:  # built by the task (its options), written to the test's store
        ids += store.enqueue([step.new_job((rng.uniform(0.2, 0.6),), {},
                                           after=[ids[p] for p in parents])])
    assert {j.status for j in store.get_jobs(ids)} >= {"waiting"}

    for threshold in (12, 35):  # SIGKILL a thread-pool worker holding jobs, twice
        wait_for(lambda t=threshold: done_count(store, ids) >= t, 120, f"{threshold} done")
        victims = [w for w in workers[:2] if w.alive()]
        victim = wait_for(lambda vs=victims: next(
            (w for w in vs if held_by(store, w.pid)), None), 60, "a worker holding a job")
        victim.kill()
        workers[workers.index(victim)] = cluster.spawn(4, app=APP)

    final = wait_for(lambda: all_in(store, ids, "done"), 180, "every job done")
    by_id = {j.id: j for j in final}
    runs: dict[tuple[int, int], dict[str, Any]] = defaultdict(dict)
    ends: dict[tuple[int, int], int] = defaultdict(int)
    for r in cluster.records("runs"):
        key = (r["job"], r["attempt"])
        if r["event"] == "start":
            runs[key].setdefault("start", r["t"])
        elif r["event"] == "end":
            runs[key]["end"] = r["t"]
            ends[key] += 1
    stalled = sum(j.stall_count for j in final)
    assert stalled >= 1, "a kill landed on a held job (else the test proves little)"
    for i, parents in enumerate(dag):
        job = by_id[ids[i]]
        won = (job.id, job.attempt)
        assert ends[won] == 1, f"job {job.id}: its successful attempt ran to its end once"
        assert result_of(job)["attempt"] == job.attempt
        assert result_of(job)["parents"] == [ids[p] for p in parents], \
            f"job {job.id} was given its parents' results in after order"
        starts = [runs[(job.id, a)]["start"] for a in range(1, job.attempt + 1)
                  if "start" in runs[(job.id, a)]]
        assert starts, f"job {job.id} has no start record"
        for p in parents:
            parent = by_id[ids[p]]
            parent_end = runs[(parent.id, parent.attempt)]["end"]
            assert min(starts) > parent_end, (
                f"job {job.id} started {parent_end - min(starts):.3f}s before its parent "
                f"{parent.id}'s successful attempt ended")
