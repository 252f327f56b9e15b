"""When a burst (and drain) may stop: never while a due job exists or the worker holds one,
whatever lands between the idle check's reads (the fetcher claims concurrently)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import tether
from tether._worker.burst import is_idle
from tether.stores import NewJob, Store


class ClaimsMidway:
    """The worker's store, which lets the worker's own fetcher claim right after the
    ``at``-th read of the idle check (the claim write the fetcher makes concurrently)."""

    def __init__(self, store: Store, owner: str, queues: list[str], at: int) -> None:
        self.store, self.owner, self.queues, self.at = store, owner, queues, at
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        real = getattr(self.store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = real(*args, **kwargs)
            if self.calls == self.at:
                self.store.claim(self.owner, self.queues, 10, 30.0)
            self.calls += 1
            return result

        return call


@pytest.fixture
def app() -> Iterator[tether.App]:
    app = tether.App(f"memory://idle-{uuid.uuid4().hex}")

    @app.task(name="t")
    def t() -> None:
        pass

    yield app
    app.close()


@pytest.mark.parametrize("at", range(6))
def test_a_claim_between_the_reads_is_never_taken_for_idle(app: tether.App, at: int) -> None:
    worker = app.worker(concurrency=1, maintenance=False)
    try:
        app.store.enqueue([NewJob("t")])
        worker.store = ClaimsMidway(app.store, worker.id, worker.queues, at)  # type: ignore[assignment]
        assert is_idle(worker) is False
    finally:
        worker._hb_store.close()


def test_idle_when_nothing_is_due_or_held(app: tether.App) -> None:
    worker = app.worker(concurrency=1, maintenance=False)
    try:
        assert is_idle(worker) is True
        app.store.enqueue([NewJob("t", delay=3600)])
        assert is_idle(worker) is True, "a job due later does not keep a burst going"
        app.store.enqueue([NewJob("t")])
        assert is_idle(worker) is False
        app.store.claim(worker.id, worker.queues, 10, 30.0)
        assert is_idle(worker) is False, "held by the worker"
        app.store.pause_queue("default")
        app.store.enqueue([NewJob("t")])
        other = app.worker(concurrency=1, maintenance=False)
        assert is_idle(other) is True, "another worker's job and a paused queue's"
        other._hb_store.close()
    finally:
        worker._hb_store.close()


def test_a_burst_stops_once_whatever_asks(app: tether.App) -> None:
    """Two triggers (idle, max_jobs) must not make the second SIGTERM, which would hand the
    running jobs' leases back."""
    from tether._worker.burst import Stopper
    from tether._worker.shutdown import Phase

    worker = app.worker(concurrency=1, maintenance=False)
    try:
        stop = Stopper(worker)
        stop("burst: no job is due")
        stop("burst: 1 job(s) claimed (max_jobs)")
        assert worker.shutdown.phase == Phase.DRAINING
    finally:
        worker._hb_store.close()
