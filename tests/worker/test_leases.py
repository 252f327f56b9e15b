"""The worker side of the lease protocol: renewal that cannot be starved, and loss handling."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import tether
from tests.worker.helpers import running, status, wait_until
from tether._errors import StoreUnavailable
from tether.stores import HeartbeatResult, Lease

pytestmark = pytest.mark.timeout(60)
MakeApp = Callable[..., tether.App]


@pytest.mark.slow
def test_blocking_handlers_keep_their_leases(make_app: MakeApp) -> None:
    """A sync handler blocking its thread and an async one blocking its event loop for 3 ×
    lease_ttl are not reaped: the heartbeater has its own thread and connection."""
    app = make_app(lease_ttl=0.6)
    block = 3 * 0.6

    @app.task
    def busy() -> str:
        time.sleep(block)
        return "sync"

    @app.task
    async def hog() -> str:
        time.sleep(block)  # blocks the event loop on purpose
        return "async"

    a, b = busy.enqueue(), hog.enqueue()
    with running(app, concurrency=2) as worker:
        wait_until(lambda: status(app, a) == "done" and status(app, b) == "done", timeout=20)
        assert worker.heartbeater.beats >= 3
    for job_id in (a, b):
        job = app.get_job(job_id)
        assert (job.attempt, job.stall_count) == (1, 0), job


def test_one_heartbeat_statement_per_interval_whatever_in_flight(make_app: MakeApp) -> None:
    app = make_app(lease_ttl=0.9)
    calls: list[int] = []
    release = threading.Event()

    @app.task
    def hold() -> None:
        release.wait(10)

    ids = hold.enqueue_many([((), {}) for _ in range(20)])
    with running(app, concurrency=20) as worker:
        original = worker.heartbeater.store.heartbeat

        def counting(owner: str, leases: Any, ttl: float, **kw: Any) -> HeartbeatResult:
            calls.append(len(leases))
            return original(owner, leases, ttl, **kw)

        worker.heartbeater.store.heartbeat = counting  # type: ignore[method-assign]
        wait_until(lambda: len(calls) >= 3 and calls[-1] == 20, timeout=10)
        release.set()
        wait_until(lambda: all(status(app, i) == "done" for i in ids))
    assert max(calls) == 20  # all twenty leases in one call


def test_lost_lease_interrupts_handler_and_rejects_its_write(make_app: MakeApp) -> None:
    app = make_app(lease_ttl=1.0, reaper_interval=0)
    saw: list[str] = []
    lost: list[int | None] = []
    app.on("lease_lost", lambda e: lost.append(e.job_id))

    @app.task
    def victim() -> None:
        job = tether.current_job()
        try:
            while True:
                job.check_cancelled()
                time.sleep(0.01)
        except tether.LeaseInterrupted:
            saw.append("interrupted")
            raise

    @app.task
    async def avictim() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            saw.append("async-cancelled")
            raise

    a, b = victim.enqueue(), avictim.enqueue()
    with running(app, concurrency=2):
        wait_until(lambda: status(app, a) == "running" and status(app, b) == "running")
        store = app.store
        reaped = store.reap_expired(0, now=store.now() + 60)  # as if the leases had lapsed
        assert {r.job_id for r in reaped} == {a, b}
        wait_until(lambda: sorted(saw) == ["async-cancelled", "interrupted"], timeout=5)
        wait_until(lambda: {a, b} <= set(lost))
    for job_id in (a, b):
        job = app.get_job(job_id)
        assert job.status in ("pending", "running") and job.stall_count == 1


class FlakyStore:
    """Fault injection at the store seam: the real store, unreachable or hanging on demand."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.down = False
        self.hang = threading.Event()  # set: calls hang until released
        self.release = threading.Event()

    def heartbeat(self, owner: str, leases: list[Lease], ttl: float,
                  **kw: Any) -> HeartbeatResult:
        if self.hang.is_set():
            self.release.wait(30)
        if self.down:
            raise StoreUnavailable("injected: connection refused")
        result: HeartbeatResult = self.inner.heartbeat(owner, leases, ttl, **kw)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@contextmanager
def waiting_job(make_app: MakeApp) -> Iterator[tuple[tether.App, int, FlakyStore,
                                                     threading.Event]]:
    """A running job whose handler waits until interrupted, on a worker whose heartbeater
    talks to the store through a FlakyStore; yields the event set on LeaseInterrupted."""
    app = make_app(lease_ttl=1.0, reaper_interval=0)
    interrupted = threading.Event()

    @app.task
    def careful() -> None:
        job = tether.current_job()
        while not job.wait(0.01):
            pass
        if job.stop_reason == "LeaseInterrupted":
            interrupted.set()

    job_id = careful.enqueue()
    with running(app, concurrency=1) as worker:
        flaky = FlakyStore(worker.heartbeater.store)
        worker.heartbeater.store = flaky  # type: ignore[assignment]
        wait_until(lambda: status(app, job_id) == "running")
        try:
            yield app, job_id, flaky, interrupted
        finally:
            flaky.release.set()


@pytest.mark.serial  # bounds a latency promise in wall-clock seconds
@pytest.mark.slow
def test_unreachable_store_loses_the_lease_after_lease_ttl(make_app: MakeApp) -> None:
    with waiting_job(make_app) as (app, job_id, flaky, interrupted):
        flaky.down = True
        cut = time.monotonic()
        assert interrupted.wait(5), "handler was not interrupted"
        assert time.monotonic() - cut <= 1.0 + 1.2  # lease_ttl plus one retry tick
        # The handler returned after the interruption. Nobody else took the job (the store
        # still held the lease), so its fenced write is accepted: the fence, not the local
        # trust window, is the ground truth for writes.
        wait_until(lambda: status(app, job_id) == "done")
    assert app.get_job(job_id).attempt == 1


@pytest.mark.serial  # bounds a latency promise in wall-clock seconds
@pytest.mark.slow
def test_hanging_heartbeat_still_loses_the_lease_within_lease_ttl(make_app: MakeApp) -> None:
    """A heartbeat stuck on a dead connection must not stretch the trust window."""
    with waiting_job(make_app) as (_app, _job_id, flaky, interrupted):
        flaky.hang.set()
        cut = time.monotonic()
        assert interrupted.wait(5), "handler was not interrupted while the call hung"
        assert time.monotonic() - cut <= 1.0 + 0.5
