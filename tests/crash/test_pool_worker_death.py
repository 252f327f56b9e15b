"""A process-pool worker SIGKILLed while its handlers run leaves nothing running (issue #22).

Real ``tether worker --pool process`` subprocesses, every store. The handler starts a shell
loop (a stand-in for ffmpeg or a payment CLI) that appends to a file every 50 ms and records
its pid and its child's (the ``runs`` records: pid files). SIGKILL the worker: the child, the
subprocess and everything else of the child's process group must be gone, the side effect
must stop, and the job must be started again by the other worker (attempt 2).

Also when the handler is inside a C call that holds the GIL (no thread of the child can run
Python until it returns): the child's own watch cannot act then, so something outside the
child's interpreter must end its group.

And the job is back soon, whatever the lease says: with ``lease_ttl=60`` the next attempt
starts within docs/guarantees.md's bound for a process death on a live machine (1.5 s, every
trial), measured on the store's clock (the kill stamped with ``store.now()`` just before the
signal, the next attempt's ``started_at``). The children hold no liveness token of their own:
the worker's token goes with the worker, and its jobs are reaped at once.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.crash.conftest import MakeCluster
from tests.crash.harness import Cluster, enqueue, get, wait_for
from tests.crash.test_liveness_crash import EVERY_BOUND, LEASE_TTL
from tests.crash.test_pool import POOL, started
from tests.processes import alive, in_group
from tether.stores import Store

#: Far below the handler's 60 s wait: the group dies with the worker, not with the handler.
GONE_WITHIN = 10.0


def lines(cluster: Cluster, job_id: int) -> int:
    try:
        return (cluster.folder / f"grandchild-{job_id}-1.log").read_text().count("\n")
    except FileNotFoundError:
        return 0


@pytest.mark.crash
@pytest.mark.timeout(120)
@pytest.mark.parametrize("gil", [False, True], ids=["python", "gil_held"])
def test_a_killed_worker_leaves_no_handler_running(
    make_cluster: MakeCluster, store_url: str, store: Store, gil: bool
) -> None:
    cluster: Cluster = make_cluster(store_url, lease_ttl=LEASE_TTL)
    doomed = cluster.spawn(1, *POOL)
    cluster.wait_registered(store, doomed)
    [job_id] = enqueue(store, "crash.grandchild", 60.0, max_attempts=3, gil=gil)
    first = started(cluster, job_id, 1)
    child, sub = int(first["pid"]), int(first["grandchild"])
    group = [p for p in in_group(child) if p != child]
    try:
        wait_for(lambda: lines(cluster, job_id) >= 1, 10, "the subprocess's side effect")
        survivor = cluster.spawn(1, *POOL)
        cluster.wait_registered(store, survivor)
        killed_at = store.now()
        doomed.kill()
        wait_for(lambda: not alive(child), GONE_WITHIN, f"the handler's child {child} to die")
        wait_for(lambda: not alive(sub), GONE_WITHIN, f"the handler's subprocess {sub} to die")
        wait_for(lambda: not any(alive(p) for p in in_group(child)), GONE_WITHIN,
                 "nothing left in the child's process group")
        written = lines(cluster, job_id)
        time.sleep(0.2)  # four of the subprocess's 50 ms periods: a live loop would write
        assert lines(cluster, job_id) == written, "the side effect stopped"
        second = started(cluster, job_id, 2)
        assert int(second["pid"]) != child
        job = get(store, job_id)
        assert job.attempt >= 2 and job.started_at is not None
        back = job.started_at - killed_at
        print(f"job back (attempt 2 started) {back:.2f} s after the kill "
              f"(lease_ttl {LEASE_TTL:g} s)")
        assert back < EVERY_BOUND, f"the job came back {back:.2f} s after the kill"
    finally:
        for pid in {sub, *group, *in_group(child)}:
            if alive(pid):  # the fix failed: leave nothing behind on the machine
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
