"""Store outages seen by real worker processes (issue #8, item B).

PostgreSQL and Redis are broken through the loopback fault proxy (tests/faults.py); SQLite is
"down" while another connection holds its write lock (every write of the worker waits).

* An idle worker and a busy one ride out a 10 s outage: neither exits, nothing is lost, and
  work resumes promptly once the server is back.
* A second SIGTERM while the store is down exits at once, and the log says the leases could
  not be handed back (they come back by expiry) instead of claiming it handed them back.
"""

from __future__ import annotations

import signal
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from tests.crash.conftest import MakeCluster
from tests.crash.harness import all_in, enqueue, get, held_by, wait_for
from tests.faults import FaultProxy
from tether._worker.worker import FORCED_EXIT_WAIT
from tether.stores import Store

MakeProxy = Callable[[str], FaultProxy]


@contextmanager
def sqlite_write_lock(url: str) -> Iterator[None]:
    """Hold SQLite's write lock (as a paused writer would) until the block ends."""
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, timeout=10)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


@pytest.mark.crash
@pytest.mark.timeout(90)
@pytest.mark.parametrize("store_kind", ["postgres", "redis"])
def test_idle_and_busy_workers_ride_out_an_outage(
    make_cluster: MakeCluster, store_url: str, store: Store, fault_proxy: MakeProxy
) -> None:
    kind = "postgres" if store_url.startswith("postgres") else "redis"
    proxy = fault_proxy(kind)
    cluster = make_cluster(proxy.url(store_url), lease_ttl=15.0)
    busy = cluster.spawn(2)
    cluster.wait_registered(store, busy)
    long_jobs = enqueue(store, "crash.work", 14.0, 0.2, n=2, interruptible=True)
    wait_for(lambda: len(held_by(store, busy.pid)) == 2, 15, "the busy worker to hold both")
    idle = cluster.spawn(2)
    cluster.wait_registered(store, idle)

    # Start the outage just after a renewal. Started at a random moment, the last renewal could
    # be a whole interval (lease_ttl / 3 = 5 s) old: the leases then ran out as the 10 s outage
    # ended, and a loaded machine's late first heartbeat lost them (seen: reaped, attempt 2).
    renewed = get(store, long_jobs[0]).lease_until or 0.0
    wait_for(lambda: (get(store, long_jobs[0]).lease_until or 0.0) > renewed, 10,
             "a heartbeat to renew the long jobs' leases")
    proxy.refuse(10.0)
    wait_for(lambda: not proxy.refusing, 15, "the 10 s outage to end")
    back = time.time()
    assert busy.alive() and idle.alive(), "a worker exited during the outage"
    [quick] = enqueue(store, "crash.work", 0.1, 0.1)
    done = wait_for(lambda: all_in(store, [quick], "done"), 15, "a job after the outage")[0]
    resumed = (done.started_at or 0.0) - back
    assert resumed < 2.5, f"the idle worker picked up work {resumed:.2f}s after the outage"
    finished = wait_for(lambda: all_in(store, long_jobs, "done"), 30, "the long jobs to end")
    for job in finished:  # their leases outlived the outage: nothing was reaped or rerun
        assert (job.attempt, job.stall_count) == (1, 0), job
    assert busy.alive() and idle.alive()


@pytest.mark.crash
@pytest.mark.timeout(90)
def test_second_sigterm_while_the_store_is_down_exits_at_once(
    make_cluster: MakeCluster, store_url: str, store: Store, fault_proxy: MakeProxy
) -> None:
    down: Callable[[], object]
    if store_url.startswith("sqlite"):
        url = store_url
        lock = sqlite_write_lock(store_url)
        down, up = lock.__enter__, lambda: lock.__exit__(None, None, None)
    else:
        proxy = fault_proxy("postgres" if store_url.startswith("postgres") else "redis")
        url = proxy.url(store_url)
        down, up = (lambda: proxy.refuse(300.0)), proxy.restore
    cluster = make_cluster(url, lease_ttl=6.0)
    worker = cluster.spawn(2)
    cluster.wait_registered(store, worker)
    [job_id] = enqueue(store, "crash.work", 60.0, 0.2, interruptible=True)
    wait_for(lambda: held_by(store, worker.pid), 15, "the worker to claim the job")
    wait_for(lambda: any(r["event"] == "start" for r in cluster.records("runs")), 10,
             "the handler to start")

    down()
    try:
        worker.send(signal.SIGTERM)
        wait_for(lambda: worker.logged("draining in-flight jobs"), 10, "the first SIGTERM")
        worker.send(signal.SIGTERM)
        second = time.monotonic()
        worker.proc.wait(30)
        took = time.monotonic() - second
    finally:
        up()
    log = worker.log_text()
    # "Within about 2 s" (guarantees.md) is the worker's own stop, FORCED_EXIT_WAIT: read from
    # its log, since the interpreter's exit on a loaded machine took 2 s more (5.0 s in all,
    # 2.7 s of it the worker's). The process exit must still beat the drain (10 s) by far.
    stopped = worker.logged_at(r"tether\.worker: worker \S+ stopped$")
    own = stopped - worker.logged_at("handing leases back now")
    assert own < FORCED_EXIT_WAIT + 1.0, f"stopped {own:.1f}s after the second SIGTERM:\n{log}"
    assert took < cluster.shutdown_timeout / 2, f"exited {took:.1f}s after it:\n{log}"
    assert "could not hand back 1 lease" in log and "lease expiry" in log, log
    assert "handed back" not in log, log
    job = get(store, job_id)
    assert job.status == "running" and job.attempt == 1, job  # what the log said: not handed back

    # It comes back by expiry, through the reaper, within the bound.
    rescuer = cluster.spawn(2)
    done = wait_for(lambda: all_in(store, [job_id], "done"), 30, "the job to come back")[0]
    assert (done.attempt, done.stall_count) == (2, 1), done
    assert rescuer.alive()
