"""Client retries (issue #8, item C) and the store-busy warning (item J, worker side).

* ``App.enqueue_jobs`` retries a transient failure a few times, briefly, with the *same*
  request id, so a store that did the insert but lost the reply answers the retry from its
  request record instead of inserting twice.
* The fetcher retries a failed claim with the same request id first, so jobs claimed by a call
  whose reply was lost come back to this worker instead of sitting orphaned until reaped.
* A store that has been failing for more than ``lease_ttl / 3`` is reported once at WARNING,
  and its recovery at INFO.

The "lost reply" is made by wrapping the real store's method: it performs the real call and
then raises as a dropped connection would. tests/crash/test_outages.py breaks real sockets.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import tether
from tests import clocks
from tests.worker.helpers import running, status, wait_until
from tether._errors import StoreUnavailable
from tether._worker.worker import Worker
from tether.stores import Store

pytestmark = pytest.mark.timeout(60)
MakeApp = Callable[..., tether.App]


def call_through(real: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the real store method."""
    return real(*args, **kwargs)


def test_enqueue_retries_a_transient_failure_with_the_same_request_id(
    make_app: MakeApp,
) -> None:
    app = make_app()
    real = app.store.enqueue
    seen: list[str | None] = []

    def flaky(jobs: Any, *, request_id: str | None = None, **kwargs: Any) -> list[int]:
        seen.append(request_id)
        if len(seen) <= 2:
            raise StoreUnavailable("connection reset by peer")
        result: list[int] = call_through(real, jobs, request_id=request_id, **kwargs)
        return result

    app.store.enqueue = flaky  # type: ignore[method-assign]
    job_id = app.enqueue("remote.task", 1)
    assert len(seen) == 3 and seen[0] is not None and len(set(seen)) == 1, seen
    assert len(seen[0]) == 32  # uuid4 hex
    assert [j.id for j in app.store.list_jobs()] == [job_id]
    app.enqueue("remote.task", 2)
    assert seen[-1] != seen[0], "each enqueue call has its own request id"


def test_enqueue_gives_up_on_a_store_that_stays_down_within_two_seconds(
    make_app: MakeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app()
    app.store.check_schema()  # opened before the clock jumps
    calls: list[float] = []
    clock = clocks.install(monkeypatch)  # the retry's pauses are recorded, not slept

    def down(jobs: Any, *, request_id: str | None = None, **kwargs: Any) -> list[int]:
        calls.append(time.monotonic())
        raise StoreUnavailable("connection refused")

    app.store.enqueue = down  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable, match="connection refused"):
        app.enqueue("remote.task", 1)
    assert 2 <= len(calls) <= 6, calls
    # Every pause between attempts went through tether's clock: together under 2 s (the
    # enqueue's own time on a loaded machine is not what this bounds).
    assert len(clock.pauses) == len(calls) - 1, clock.pauses
    assert clock.slept < 2.0, clock.pauses


@contextmanager
def worker_thread(worker: Worker) -> Iterator[None]:
    thread = threading.Thread(target=lambda: worker.run(install_signals=False), daemon=True)
    thread.start()
    try:
        yield
    finally:
        worker.stop(force=True)
        thread.join(15)


def test_a_claim_whose_reply_is_lost_is_retried_with_the_same_request_id(
    make_app: MakeApp,
) -> None:
    app = make_app(lease_ttl=2.0)

    @app.task
    def job() -> str:
        return "ran"

    worker: Worker = app.worker(concurrency=1)
    store: Store = worker.store
    real = store.claim
    seen: list[str | None] = []
    lost: list[str | None] = []

    def lossy(*args: Any, request_id: str | None = None, **kwargs: Any) -> Any:
        seen.append(request_id)
        got = call_through(real, *args, request_id=request_id, **kwargs)
        if got and not lost:  # the claim happened; its reply never arrives
            lost.append(seen[-1])
            raise StoreUnavailable("server closed the connection unexpectedly")
        return got

    store.claim = lossy  # type: ignore[method-assign]
    job_id = job.enqueue()
    with worker_thread(worker):
        wait_until(lambda: lost and len(seen) > seen.index(lost[0]) + 1,
                   what="the claim to be retried")
        assert lost[0] is not None
        assert seen[seen.index(lost[0]) + 1] == lost[0], "the retry must reuse the request id"
        wait_until(lambda: status(app, job_id) == "done", what="the job to run")
    done = app.get_job(job_id)
    assert (done.attempt, done.stall_count) == (1, 0), "the lost claim was orphaned and reaped"


@pytest.mark.slow
def test_a_store_busy_past_a_third_of_the_lease_is_reported_once(
    make_app: MakeApp, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(lease_ttl=1.5, reaper_interval=0.2)
    busy = threading.Event()
    message = "SQLite database is busy: another process holds the write lock (a paused worker?)"

    @app.task
    def hold() -> None:
        tether.current_job().wait(5)

    worker: Worker = app.worker(concurrency=1)
    stores = {id(s): s for s in (worker.store, worker.heartbeater.store,
                                 worker.maintainer.store if worker.maintainer else None) if s}
    for s in stores.values():
        for name in ("claim", "heartbeat", "finish", "wait_for_jobs", "reap_expired",
                     "next_lease_expiry", "leader_acquire", "leader_renew", "prune"):
            real = getattr(s, name)

            def blocked(*a: Any, _real: Any = real, **kw: Any) -> Any:
                if busy.is_set():
                    time.sleep(0.05)
                    raise StoreUnavailable(message)
                return _real(*a, **kw)

            setattr(s, name, blocked)

    def health(level: int) -> list[str]:
        return [r.getMessage() for r in caplog.records
                if r.levelno == level and "lease_ttl / 3" in r.getMessage()]

    hold.enqueue()
    with caplog.at_level(logging.INFO, logger="tether"), worker_thread(worker):
        wait_until(lambda: worker.heartbeater.beats >= 1, what="a first heartbeat")
        busy.set()
        began = time.monotonic()
        wait_until(lambda: health(logging.WARNING), timeout=5, what="the busy warning")
        assert time.monotonic() - began >= 0.5 - 0.05
        threading.Event().wait(0.6)  # more failures: still one warning
        busy.clear()
        wait_until(lambda: [m for m in caplog.messages if "store answers again" in m],
                   timeout=5, what="the recovery")
    [warning] = health(logging.WARNING)
    assert message in warning
    assert len([m for m in caplog.messages if "store answers again" in m]) == 1



@pytest.mark.slow
@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_a_held_sqlite_write_lock_is_reported_after_a_third_of_the_lease(
    make_app: MakeApp, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process holds SQLite's write lock (a paused worker would): the heartbeat waits
    in SQLite's busy handler far longer than lease_ttl / 3; the worker says so meanwhile."""
    app = make_app(lease_ttl=3.0)

    @app.task
    def hold() -> None:
        tether.current_job().wait(30)

    hold.enqueue()
    path = app.runtime.url.removeprefix("sqlite:///")
    with caplog.at_level(logging.INFO, logger="tether"), running(app, concurrency=1) as worker:
        wait_until(lambda: worker.heartbeater.beats >= 1 and len(worker.registry) == 1,
                   what="a job in flight")
        lock = sqlite3.connect(path, isolation_level=None, timeout=10)
        lock.execute("BEGIN IMMEDIATE")
        began = time.monotonic()
        try:
            wait_until(lambda: any("lease_ttl / 3" in m for m in caplog.messages), timeout=5,
                       what="the busy warning")
            assert time.monotonic() - began >= 1.0 - 0.1
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        wait_until(lambda: any("store answers again" in m for m in caplog.messages),
                   timeout=10, what="the recovery")
    warnings = [m for m in caplog.messages if "lease_ttl / 3" in m]
    assert len(warnings) == 1, warnings
