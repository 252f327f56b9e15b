"""A 10 s outage of the store's server, through the fault proxy (issue #8, acceptance 2).

The proxy (``faulty``) refuses every connection for 10 s (and cuts the live ones) while a real
worker runs in-process: idle in one test, busy in the other. No worker may exit, no job may be
lost, and work must resume within about a second of the server's return. ``store`` reaches
the server directly, to enqueue during the outage and to check what happened.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import tether
from tests.contract.helpers import Faulty
from tests.faults import FaultProxy
from tests.worker.helpers import wait_until
from tether.stores import NewJob, Store

# serial: work must resume within RESUME seconds of the server's return (wall clock)
pytestmark = [pytest.mark.timeout(120), pytest.mark.slow, pytest.mark.serial]
OUTAGE = 10.0
RESUME = 2.0  # "about a second": the wake-up/poll plus scheduling noise on a loaded box


def _resumed_in_time(seconds: float) -> None:
    assert seconds < RESUME, f"resumed {seconds:.2f}s after the server's return"


@contextmanager
def _worker(app: tether.App, **options: object) -> Iterator[threading.Thread]:
    worker = app.worker(**options)  # type: ignore[arg-type]
    codes: list[int] = []
    thread = threading.Thread(
        target=lambda: codes.append(worker.run(install_signals=False)), daemon=True
    )
    thread.start()
    try:
        yield thread
    finally:
        worker.stop(force=True)
        thread.join(20)
    assert codes in ([], [0]), f"the worker exited with {codes}"


def _status(store: Store, job_id: int) -> str | None:
    job = store.get_job(job_id)
    return None if job is None else job.status


def _done(store: Store) -> set[int]:
    return {j.id for j in store.list_jobs(status="done", limit=1000)}


def _outage(proxy: FaultProxy) -> float:
    """Refuse for OUTAGE seconds; returns the monotonic time the server is back."""
    proxy.refuse(OUTAGE)
    back = time.monotonic() + OUTAGE
    while proxy.refusing:
        time.sleep(0.05)
    return back


def test_an_idle_worker_rides_out_an_outage_and_resumes_at_once(
    faulty: Faulty, store: Store
) -> None:
    proxy = faulty.proxy
    app = tether.App(faulty.url, lease_ttl=3.0, poll_interval=30.0)
    try:
        done: dict[int, float] = {}  # job id -> when it first ran

        @app.task(name="outage.ping")
        def ping() -> None:
            done.setdefault(tether.current_job().id, time.monotonic())

        with _worker(app, concurrency=2) as thread:
            first = ping.enqueue()
            wait_until(lambda: first in done, what="the first job")
            back = _outage(proxy)
            assert thread.is_alive(), "the worker exited during the outage"
            # Enqueued straight on the server, during the outage's last moment: the worker
            # must pick it up once it can reach Redis again, not at its next 30 s poll.
            (later,) = store.enqueue([NewJob("outage.ping")])
            wait_until(lambda: later in done, timeout=OUTAGE, what="the job after the outage")
            # The first job's outcome may have been cut off by the outage: it comes back by
            # its lease and runs again. Either way nothing is lost.
            wait_until(lambda: all(_status(store, i) == "done" for i in (first, later)),
                       timeout=OUTAGE, what="both jobs done")
            assert thread.is_alive()
        _resumed_in_time(done[later] - back)
    finally:
        app.close()


def test_a_busy_worker_rides_out_an_outage_and_loses_no_job(
    faulty: Faulty, store: Store
) -> None:
    proxy = faulty.proxy
    app = tether.App(faulty.url, lease_ttl=4.0, poll_interval=1.0)
    try:
        runs: dict[int, int] = {}
        lock = threading.Lock()

        @app.task(name="outage.work", max_attempts=10, max_stalls=10,
                  retry=tether.Backoff(base=0.05, max=0.2, jitter=0))
        def work(n: int) -> int:
            with lock:
                runs[n] = runs.get(n, 0) + 1
            tether.current_job().wait(0.3)
            return n

        ids = work.enqueue_many([((n,), {}) for n in range(60)])
        with _worker(app, concurrency=4) as thread:
            wait_until(lambda: len(runs) >= 8, what="work under way")
            back = _outage(proxy)
            assert thread.is_alive(), "the worker exited during the outage"
            before = _done(store)
            wait_until(lambda: _done(store) - before, timeout=OUTAGE, what="progress after it")
            resumed = time.monotonic() - back
            wait_until(lambda: len(_done(store)) == len(ids), timeout=90, what="every job done")
            assert thread.is_alive()
        jobs = [store.get_job(i) for i in ids]
        assert all(j is not None and j.status == "done" for j in jobs), "a job was lost"
        assert sorted(runs) == list(range(60))
        _resumed_in_time(resumed)
    finally:
        app.close()


STORE_NAMES = {"postgres": "PostgreSQL", "redis": "Redis", "remote-sqlite": "tether server",
               "remote-postgres": "tether server", "remote-redis": "tether server"}


def test_a_frozen_server_is_reported_naming_its_store(
    faulty: Faulty, store_kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that stops answering (every byte held up by the proxy, nothing refused) makes
    a call hang; the worker's WARNING names the store it runs on. It used to say "SQLite:
    another process holds the write lock" on every store."""
    proxy = faulty.proxy
    app = tether.App(faulty.url, lease_ttl=3.0, poll_interval=1.0)
    try:
        started = threading.Event()

        @app.task(name="outage.hold")
        def hold() -> None:
            started.set()
            tether.current_job().wait(60)

        hold.enqueue()
        with caplog.at_level(logging.WARNING, logger="tether"), _worker(app):
            wait_until(started.is_set, what="the job running")
            proxy.delay(120)  # frozen: connections stay open, nothing gets through

            def warned() -> list[str]:
                return [r.getMessage() for r in caplog.records
                        if "has been waiting" in r.getMessage()]

            try:
                wait_until(lambda: bool(warned()), timeout=30, what="the hang reported")
            finally:
                proxy.delay(0)
                proxy.cut()  # the held calls fail now instead of in two minutes
        [message] = warned()
        assert STORE_NAMES[store_kind] in message, message
        assert "SQLite" not in message, message
    finally:
        app.close()
