"""Flow control in a real worker (issue #19): per-queue slots, fleet-wide limits passed with
every claim, and Snooze. Conditions are waited on, never fixed sleeps."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import tether
from tests.worker.helpers import running, wait_until

pytestmark = pytest.mark.timeout(90)
MakeApp = Callable[..., tether.App]


class Gauge:
    """How many handlers run at once, and the most seen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = self.done = 0

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1
            self.done += 1


def test_a_queue_with_slots_never_takes_every_slot(make_app: MakeApp) -> None:
    app = make_app()
    release = threading.Event()
    slow_gauge, quick_gauge = Gauge(), Gauge()

    @app.task(name="slow", queue="slow")
    def slow() -> None:
        slow_gauge.enter()
        try:
            release.wait(60)
        finally:
            slow_gauge.leave()

    @app.task(name="quick")
    def quick() -> None:
        quick_gauge.enter()
        quick_gauge.leave()

    slow_ids = [slow.enqueue() for _ in range(4)]
    quick_ids = [quick.enqueue() for _ in range(12)]
    try:
        with running(app, queues=["slow=1", "default=3"]) as worker:
            assert worker.concurrency == 4
            wait_until(lambda: quick_gauge.done == 12, 30, "every default job to run while "
                       "slow jobs hold their lane")
            assert slow_gauge.now == 1 and slow_gauge.most == 1, "the slow lane has 1 slot"
            # The gauge counts handlers that returned; their outcomes are written just after.
            wait_until(lambda: all(app.get_job(i).status == "done" for i in quick_ids), 5,
                       "the default jobs' outcomes")
            assert slow_gauge.now == 1 and slow_gauge.most == 1
            release.set()
            wait_until(lambda: all(app.get_job(i).status == "done" for i in slow_ids), 30,
                       "the slow jobs, one at a time")
            assert slow_gauge.most == 1
    finally:
        release.set()


def test_a_task_limit_holds_in_the_worker(make_app: MakeApp) -> None:
    app = make_app()
    gauge = Gauge()
    gate = threading.Event()

    @app.task(name="limited", concurrency=2)
    def limited() -> None:
        gauge.enter()
        try:
            gate.wait(30)
        finally:
            gauge.leave()

    ids = [limited.enqueue() for _ in range(6)]
    try:
        with running(app, concurrency=6):
            wait_until(lambda: gauge.now == 2, 30, "the limit reached")
            # Every slot of the worker is free but two: the store holds the other jobs back.
            assert sum(app.get_job(i).status == "running" for i in ids) == 2
            gate.set()
            wait_until(lambda: gauge.done == 6, 30, "every job")
        assert gauge.most == 2
    finally:
        gate.set()


def test_snooze_puts_the_job_back_without_spending_an_attempt(make_app: MakeApp) -> None:
    app = make_app()
    snoozed: list[Any] = []
    app.on("snoozed", snoozed.append)

    @app.task(name="polite", max_attempts=1)
    def polite() -> str:
        if tether.current_job().attempt == 1:
            raise tether.Snooze(0.2, "the API said later")
        return "ok"

    job_id = polite.enqueue()
    with running(app):
        wait_until(lambda: app.get_job(job_id).status == "done", 30, "the job after its snooze")
    job = app.get_job(job_id)
    assert (job.snoozes, job.failures, job.attempt, job.tries) == (1, 0, 2, 1)
    assert job.result == "ok"
    (record,) = job.errors
    assert record["reason"] == "snoozed"
    assert record["error"] == "snoozed for 0.2 s: the API said later"
    assert job.last_error is None
    assert [e.job_id for e in snoozed] == [job_id]
