"""Real workers (in-process) riding out PostgreSQL outages, failovers and lost replies (issue
#8, B and the acceptance's fault-proxy tests).

Every worker reaches the database through the fault proxy; the test's own store talks to the
server directly, so it can enqueue and inspect while the workers are cut off. Nothing here
sleeps in place of a condition, except the outage itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

import tether
from tests.faults import FaultProxy
from tests.servers import PG_DSN
from tests.worker.helpers import wait_until
from tether._errors import StoreUnavailable
from tether._worker.worker import Worker
from tether.stores._postgres.store import PostgresStore

# serial: work must resume within RESUME seconds of the server's return (wall clock)
pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.timeout(120)]

OUTAGE = 10.0
#: How soon after the server's return a waiting job must be claimed (issue #8: ~1 s).
RESUME = 1.0
#: The fetcher's longest claim backoff on main: nothing may take longer than that.


@contextmanager
def worker_running(app: tether.App, **options: Any) -> Iterator[tuple[Worker, list[int]]]:
    """A worker on a thread; ``codes`` gets its exit code if it ever stops by itself."""
    worker: Worker = app.worker(**options)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run(install_signals=False)),
                              daemon=True)
    thread.start()
    try:
        yield worker, codes
    finally:
        worker.stop(force=True)
        thread.join(20)
        assert not thread.is_alive(), "worker did not stop"


def _app(url: str, **settings: Any) -> tether.App:
    settings.setdefault("lease_ttl", 30)
    settings.setdefault("poll_interval", 5.0)  # resumption must not come from polling
    return tether.App(url, **settings)


def _retried(call: Callable[[], int]) -> int:
    """A producer's retry on StoreUnavailable (its pooled connection died in the failover)."""
    for _ in range(50):
        try:
            return call()
        except StoreUnavailable:
            time.sleep(0.1)
    return call()


def _waiting_backends(pg: PostgresStore, store: object) -> int:
    """How many backends of the worker's store sit idle after LISTEN, or after taking the jobs
    key that a waiting worker holds (its listener)."""
    name = getattr(store, "application_name", "")
    with pg.transaction() as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                           "AND (query LIKE 'LISTEN%%' OR query LIKE "
                           "'%%pg_try_advisory_lock_shared%%') AND state = 'idle'",
                           (name,)).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
def test_a_10s_outage_loses_nothing_and_workers_resume_at_once(
    pg: PostgresStore, fault_proxy: Callable[[str], FaultProxy], busy: bool
) -> None:
    proxy = fault_proxy("postgres")
    app = _app(proxy.url(pg.url))
    released = threading.Event()

    @app.task(name="hold")
    def hold(n: int) -> int:
        released.wait(30)
        return n

    @app.task(name="quick")
    def quick(n: int) -> int:
        return n

    try:
        with worker_running(app, concurrency=4) as (worker, codes):
            wait_until(lambda: any(w.id == worker.id for w in pg.list_workers()),
                       what="the worker to register")
            held = [app.enqueue("hold", i) for i in range(2)] if busy else []
            if busy:
                wait_until(lambda: all(pg.get_job(i).status == "running" for i in held),
                           what="the held jobs to run")
            else:
                # Past its first empty claim, the fetcher is waiting for a notification.
                wait_until(lambda: _waiting_backends(pg, worker.runtime.store) > 0,
                           what="the worker to wait for jobs")
            proxy.refuse(OUTAGE)
            # Work arrives while the workers are cut off (the test's store is not).
            waiting = [pg.enqueue([tether.stores._contract.NewJob("quick", payload="[[7], {}]")])[0]
                       for _ in range(3)]
            released.set()  # the held handlers finish during the outage
            while proxy.refusing:
                assert not codes, f"the worker exited with {codes} during the outage"
                time.sleep(0.05)
            back = time.monotonic()
            wait_until(lambda: all(pg.get_job(i).status != "pending" for i in waiting),
                       timeout=30, what="the waiting jobs to be claimed")
            resumed = time.monotonic() - back
            wait_until(lambda: all(pg.get_job(i).status == "done" for i in waiting + held),
                       timeout=30, what="every job to finish")
            assert not codes
        for i in waiting + held:
            job = pg.get_job(i)
            assert job is not None
            assert (job.status, job.attempt, job.stall_count) == ("done", 1, 0), job
        print(f"resumed {resumed:.2f}s after the server's return ({'busy' if busy else 'idle'})")
        assert resumed < RESUME, f"resumed {resumed:.2f}s after the server's return"
    finally:
        app.close()


def test_a_read_only_failover_does_not_stop_the_worker(scratch_db: str) -> None:
    """The node turns read-only under the workers (a standby after failover: SQLSTATE 25006),
    then writable again (the new primary). Workers keep running throughout and then work."""
    dbname = scratch_db.rsplit("/", 1)[1]
    app = _app(scratch_db + "?schema=tether", poll_interval=0.2)

    @app.task(name="quick")
    def quick(n: int) -> int:
        return n

    def failover(read_only: bool) -> None:
        with psycopg.connect(PG_DSN, autocommit=True) as admin:
            setting = "SET default_transaction_read_only = on" if read_only else (
                "RESET default_transaction_read_only")
            admin.execute(f'ALTER DATABASE "{dbname}" {setting}')
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = %s AND pid <> pg_backend_pid()", (dbname,))

    try:
        with worker_running(app, concurrency=2) as (_, codes):
            first = app.enqueue("quick", 1)
            wait_until(lambda: app.get_job(first).status == "done", 10, "the first job")
            failover(read_only=True)
            started = time.monotonic()
            while time.monotonic() - started < 3.0:
                assert not codes, f"the worker exited with {codes} on a read-only node"
                time.sleep(0.05)
            failover(read_only=False)
            second = _retried(lambda: app.enqueue("quick", 2))
            wait_until(lambda: app.get_job(second).status == "done", 15, "the second job")
            assert not codes
    finally:
        app.close()


def test_a_lost_finish_reply_is_not_a_lost_lease(
    pg: PostgresStore, fault_proxy: Callable[[str], FaultProxy]
) -> None:
    proxy = fault_proxy("postgres")
    app = _app(proxy.url(pg.url), poll_interval=0.2)
    lost: list[tether._events.Event] = []
    app.on("lease_lost", lost.append)

    @app.task(name="quick")
    def quick(n: int) -> int:
        return n

    done_events: list[tether._events.Event] = []
    app.on("completed", done_events.append)
    try:
        with worker_running(app, concurrency=1) as (worker, codes):
            proxy.drop_next_reply(b'"kind": "done"')
            job_id = app.enqueue("quick", 1)
            wait_until(lambda: pg.get_job(job_id).status == "done", 10, "the job")
            wait_until(lambda: proxy.dropped == 1, 10, "the lost reply")
            # The completer retries the lost write and reports the outcome.
            wait_until(lambda: worker.completer.rejected or done_events, 10, "the report")
            assert not codes
        assert lost == [], "a replayed completion was reported as a lost lease"
        job = pg.get_job(job_id)
        assert job is not None and (job.attempt, job.result) == (1, "1")
    finally:
        app.close()


def test_a_lost_claim_reply_leaves_no_orphan(
    pg: PostgresStore, fault_proxy: Callable[[str], FaultProxy]
) -> None:
    proxy = fault_proxy("postgres")
    app = _app(proxy.url(pg.url), poll_interval=0.2, lease_ttl=10)

    @app.task(name="quick", queue="orphans")
    def quick(n: int) -> int:
        return n

    try:
        with worker_running(app, concurrency=1, queues=["orphans"]) as (_, codes):
            wait_until(pg.list_workers, 10, "the worker to register")
            proxy.drop_next_reply(b"orphans")
            job_id = app.enqueue("quick", 1)
            wait_until(lambda: proxy.dropped == 1, 10, "the lost claim reply")
            # Well within the lease: a retried claim with the same request id gets the job.
            wait_until(lambda: pg.get_job(job_id).status == "done", 5, "the job")
            assert not codes
        job = pg.get_job(job_id)
        assert job is not None and (job.attempt, job.stall_count) == (1, 0)
    finally:
        app.close()
