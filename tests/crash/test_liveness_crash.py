"""Death detection with real processes (issue #22): with ``lease_ttl=60``, a SIGKILLed
worker's job starts its next attempt on another worker in under 1 s (median) and under 1.5 s
(every trial), also when the dead worker was the maintenance leader; a SIGSTOPped worker keeps
its job (its token is not released by a pause).

Times come from the store: the kill is stamped with ``store.now()`` just before the signal,
and the next attempt's ``started_at`` is the store's claim time; the bounds asserted are the
ones docs/guarantees.md promises (the death check runs every 0.25 s, one claim follows).
Each store runs TRIALS kills per case, in a chain: the worker that takes the job over is the
next trial's victim, so each trial starts a single new process.
"""

from __future__ import annotations

import signal
import statistics
import time

import pytest

from tests.crash.conftest import MakeCluster
from tests.crash.harness import Cluster, Worker, enqueue, get, held_by, pid_of, wait_for
from tether.stores import Store

LEASE_TTL = 60.0
TRIALS = 5
#: docs/guarantees.md: a process that dies on a live machine has its jobs started again
#: within these (median, every trial), whatever lease_ttl says.
MEDIAN_BOUND = 1.0
EVERY_BOUND = 1.5
#: With lease_ttl=60, anything the lease did would take a minute: a restart within this
#: proves the death check did it.
LEASE_WOULD_TAKE = LEASE_TTL / 2


def _leader_pid(store: Store) -> int | None:
    lead = store.leader("maintenance")
    return pid_of(lead.holder.split(" ", 1)[0]) if lead is not None else None


def _chain(cluster: Cluster, store: Store, first: Worker, *, leader_dies: bool,
           results: list[float]) -> None:
    """TRIALS times: ``victim`` holds a fresh job, a new worker starts, the victim is killed;
    the new worker runs the next attempt and becomes the next victim."""
    victim = first
    for trial in range(TRIALS):
        [job_id] = enqueue(store, "crash.work", 600.0, 0.1)
        wait_for(lambda v=victim, i=job_id: [j for j in held_by(store, v.pid) if j.id == i], 30,
                 f"trial {trial}: the victim to hold the job")
        successor = cluster.spawn(2)
        cluster.wait_registered(store, successor)
        if leader_dies:
            wait_for(lambda v=victim: _leader_pid(store) == v.pid, 30,
                     f"trial {trial}: the victim to lead maintenance")
        else:
            assert _leader_pid(store) != victim.pid
        killed_at = store.now()
        victim.kill()
        job = wait_for(lambda i=job_id: (j if (j := get(store, i)).attempt == 2
                                and j.status in ("running", "done") else None),
                       LEASE_WOULD_TAKE, f"trial {trial}: the next attempt to start")
        took = (job.started_at or 0.0) - killed_at
        assert pid_of(job.locked_by) == successor.pid or job.status == "done"
        assert job.stall_count == 1, job
        results.append(took)
        if leader_dies:
            wait_for(lambda s=successor: _leader_pid(store) == s.pid, 30,
                     f"trial {trial}: leadership to pass to the successor")
        victim = successor


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("who", ["worker", "leader"])
def test_a_killed_workers_job_starts_again_within_a_second(
    make_cluster: MakeCluster, store_url: str, store: Store, who: str
) -> None:
    cluster = make_cluster(store_url, lease_ttl=LEASE_TTL)
    results: list[float] = []
    if who == "worker":
        # The leader serves another queue: it never holds the victims' jobs, and stays.
        leader = cluster.spawn(1, "-q", "elsewhere")
        cluster.wait_registered(store, leader)
        wait_for(lambda: _leader_pid(store) == leader.pid, 30, "the first worker to lead")
        first = cluster.spawn(2)
    else:
        first = cluster.spawn(2)
    cluster.wait_registered(store, first)
    _chain(cluster, store, first, leader_dies=who == "leader", results=results)
    median = statistics.median(results)
    shown = ", ".join(f"{t:.3f}" for t in results)
    print(f"\n{store.kind} ({who} killed): next attempt after [{shown}] s, median {median:.3f}")
    assert median < MEDIAN_BOUND, f"median {median:.3f}s (trials: {shown})"
    assert max(results) < EVERY_BOUND, f"slowest {max(results):.3f}s (trials: {shown})"


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_paused_worker_keeps_its_token_and_its_job(
    make_cluster: MakeCluster, store_url: str, store: Store
) -> None:
    cluster = make_cluster(store_url, lease_ttl=LEASE_TTL)
    leader = cluster.spawn(1, "-q", "elsewhere")
    cluster.wait_registered(store, leader)
    wait_for(lambda: _leader_pid(store) == leader.pid, 30, "the first worker to lead")
    holder = cluster.spawn(2)
    cluster.wait_registered(store, holder)
    [job_id] = enqueue(store, "crash.work", 8.0, 0.1, interruptible=True)
    wait_for(lambda: held_by(store, holder.pid), 30, "the holder to claim the job")
    wait_for(lambda: any(r["job"] == job_id and r["event"] == "start"
                         for r in cluster.records("runs")), 30, "the handler to start")
    other = cluster.spawn(2)
    cluster.wait_registered(store, other)
    holder_id = next(w.id for w in store.list_workers() if w.pid == holder.pid)

    holder.pause(store)
    paused = time.monotonic()
    while time.monotonic() - paused < 6.0:  # the pause itself is what is tested
        assert store.dead_workers([holder_id]) == frozenset(), "a paused process looked dead"
        time.sleep(0.25)
    holder.send(signal.SIGCONT)

    done = wait_for(lambda: (j if (j := get(store, job_id)).status == "done" else None), 60,
                    "the job to finish on the resumed holder")
    assert (done.attempt, done.stall_count) == (1, 0), done
    assert pid_of(done.locked_by) is None
    starts = [r for r in cluster.records("runs") if r["job"] == job_id and r["event"] == "start"]
    assert len(starts) == 1, starts
    assert not [r for r in cluster.records("events") if r["event"] == "lease_lost"]
