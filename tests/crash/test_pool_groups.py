"""A process-pool handler's own subprocesses end with its attempt (issue 18 D).

A handler starts a shell loop that appends to a file every 50 ms (a stand-in for ffmpeg, rsync
or a payment CLI) and never stops it. Whatever ends the attempt (its timeout, a cancel, a lease
taken back by the store, the child crashing, the worker SIGKILLed), the subprocess must die
with the child: its pid disappears (or is left a zombie, which runs nothing) and its file stops
growing. Each pool child leads its own process group and every stop path signals the group.

The pool is store-independent: these tests run on SQLite only (every store is covered by
tests/crash/test_pool.py).
"""

from __future__ import annotations

import os
import signal

import pytest

import tether
from tests.crash.harness import Cluster, all_in, enqueue, wait_for
from tests.crash.test_pool import POOL, exit_of, started, take_lease_back
from tests.processes import alive, in_group
from tether.stores import Store

#: Generous: the stop paths take a heartbeat (0.67 s) plus stop_grace at most.
GONE_WITHIN = 20.0


def lines(cluster: Cluster, job_id: int) -> int:
    """Lines the subprocess of the job's attempt 1 has written."""
    path = cluster.folder / f"grandchild-{job_id}-1.log"
    try:
        return path.read_text().count("\n")
    except FileNotFoundError:
        return 0


@pytest.mark.crash
@pytest.mark.timeout(90)
@pytest.mark.parametrize("store_kind", ["sqlite"])
@pytest.mark.parametrize("how", ["timeout", "cancel", "lease", "crash", "worker_sigkill"])
def test_a_handlers_subprocess_dies_with_its_attempt(
    cluster: Cluster, store: Store, how: str
) -> None:
    worker = cluster.spawn(1, *POOL)
    cluster.wait_registered(store, worker)
    task = "crash.grandchild_timeout" if how == "timeout" else "crash.grandchild"
    kwargs = {"segv": True} if how == "crash" else {}
    [job_id] = enqueue(store, task, 60.0, max_attempts=2, **kwargs)
    first = started(cluster, job_id, 1)
    sub = int(first["grandchild"])
    try:
        wait_for(lambda: lines(cluster, job_id) >= 1, 10, "the subprocess's side effect")
        if how == "cancel":
            app = tether.App(cluster.url)
            try:
                assert app.cancel(job_id) == "requested"
            finally:
                app.close()
        elif how == "lease":
            take_lease_back(store, job_id)
        elif how == "worker_sigkill":
            worker.kill()
        wait_for(lambda: not alive(sub), GONE_WITHIN,
                 f"the handler's subprocess {sub} to die with its attempt ({how})")
        wait_for(lambda: not alive(int(first["pid"])), GONE_WITHIN, "the child to be gone")
        written = lines(cluster, job_id)
        wait_for(lambda: not any(alive(p) for p in in_group(int(first["pid"]))), 5,
                 "nothing left in the child's process group")
        assert lines(cluster, job_id) == written, "the side effect stopped"
        if how != "worker_sigkill":
            gone = exit_of(cluster, job_id, 1)
            assert gone["detail"]["child"] == first["pid"]
            final = "cancelled" if how == "cancel" else "done"
            wait_for(lambda: all_in(store, [job_id], final), 20, f"the job {final}")
            assert worker.alive()
    finally:
        for pid in [sub, *in_group(int(first["pid"]))]:
            if alive(pid):  # the fix failed: leave nothing behind on the machine
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

