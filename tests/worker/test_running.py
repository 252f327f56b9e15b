"""A real worker (in-process) against every store: outcomes, retries, checkpoints, events."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import tether
from tests.worker.helpers import running, status, wait_until

pytestmark = pytest.mark.timeout(60)
MakeApp = Callable[..., tether.App]


def test_sync_and_async_tasks_complete(make_app: MakeApp) -> None:
    app = make_app()

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    @app.task
    async def mul(a: int, b: int) -> int:
        await asyncio.sleep(0.01)
        return a * b

    ids = add.enqueue_many([((i, 1), {}) for i in range(30)])
    m = mul.enqueue(6, 7)
    with running(app, concurrency=4):
        wait_until(lambda: all(status(app, i) == "done" for i in [*ids, m]), what="all done")
    assert [app.get_job(i).result for i in ids[:3]] == [1, 2, 3]
    assert (app.get_job(ids[2]).args, app.get_job(ids[2]).kwargs) == ([2, 1], {})
    assert app.get_job(m).result == 42
    assert app.get_job(m).attempt == 1


def test_errors_retry_then_dead_letter(make_app: MakeApp) -> None:
    app = make_app()
    seen: list[int] = []

    @app.task(max_attempts=3, retry=tether.Backoff(base=0.01, jitter=0))
    def flaky() -> None:
        seen.append(tether.current_job().attempt)
        raise RuntimeError("boom")

    job_id = flaky.enqueue()
    with running(app, concurrency=2):
        wait_until(lambda: status(app, job_id) == "failed", what="failed")
    job = app.get_job(job_id)
    assert seen == [1, 2, 3]
    assert (job.failures, job.failure_reason, job.stall_count) == (3, "error", 0)
    assert "RuntimeError: boom" in (job.last_error or "")
    assert len(job.errors) == 3
    assert [e["attempt"] for e in job.errors] == [1, 2, 3]
    assert all(e["reason"] == "error" for e in job.errors)


def test_fail_and_retry_requests(make_app: MakeApp) -> None:
    app = make_app()

    @app.task(max_attempts=5)
    def give_up() -> None:
        raise tether.Fail("bad input")

    @app.task(max_attempts=5)
    def later() -> str:
        if tether.current_job().attempt == 1:
            raise tether.Retry("not yet", delay=0.05)
        return "ok"

    a, b = give_up.enqueue(), later.enqueue()
    with running(app, concurrency=2):
        wait_until(lambda: status(app, a) == "failed" and status(app, b) == "done")
    assert app.get_job(a).attempt == 1 and app.get_job(a).failures == 1
    assert app.get_job(b).attempt == 2 and app.get_job(b).result == "ok"


def test_unknown_task_is_dead_lettered_at_once_with_a_zero_timeout(make_app: MakeApp) -> None:
    app = make_app(unknown_task_timeout=0)  # the hand-back for rolling deploys is off
    job_id = app.enqueue("nobody.knows.me", 1)
    with running(app, concurrency=1):
        wait_until(lambda: status(app, job_id) == "failed")
    assert app.get_job(job_id).failure_reason == "unknown_task"


def test_checkpoint_survives_into_next_attempt(make_app: MakeApp) -> None:
    app = make_app()
    seen: list[Any] = []

    @app.task(max_attempts=3, retry=tether.Backoff(base=0.01))
    def resumable() -> int:
        job = tether.current_job()
        seen.append(job.checkpoint)
        if job.attempt == 1:
            job.save_checkpoint({"done_up_to": 41})
            job.set_progress(0.5)
            raise RuntimeError("crash after checkpoint")
        return int(job.checkpoint["done_up_to"]) + 1

    job_id = resumable.enqueue()
    with running(app, concurrency=1):
        wait_until(lambda: status(app, job_id) == "done")
    assert seen == [None, {"done_up_to": 41}]
    assert app.get_job(job_id).result == 42
    assert app.get_job(job_id).progress == 0.5


def test_result_that_is_not_json_is_an_error(make_app: MakeApp) -> None:
    app = make_app()

    @app.task(max_attempts=1)
    def bad() -> object:
        return object()

    job_id = bad.enqueue()
    with running(app, concurrency=1):
        wait_until(lambda: status(app, job_id) == "failed")
    assert "JSON-serializable" in (app.get_job(job_id).last_error or "")


def test_events_and_a_failing_callback(make_app: MakeApp) -> None:
    app = make_app()
    got: list[tuple[str, int | None]] = []
    lock = threading.Lock()

    def record(event: tether.Event) -> None:
        with lock:
            got.append((event.name, event.job_id))

    def broken(event: tether.Event) -> None:
        raise ValueError("callback bug")

    for name in ("claimed", "completed", "retrying", "failed"):
        app.on(name, broken)
        app.on(name, record)

    @app.task(max_attempts=2, retry=tether.Backoff(base=0.01))
    def sometimes(ok: bool) -> None:
        if not ok:
            raise RuntimeError("no")

    good, bad = sometimes.enqueue(True), sometimes.enqueue(False)
    with running(app, concurrency=2):
        wait_until(lambda: status(app, good) == "done" and status(app, bad) == "failed")
        wait_until(lambda: ("failed", bad) in got, what="failed event")
    assert ("completed", good) in got and ("retrying", bad) in got
    assert got.count(("claimed", bad)) == 2


def test_timeout_fails_the_attempt_and_gives_up_the_lease(make_app: MakeApp) -> None:
    app = make_app()

    @app.task(timeout=0.3, max_attempts=2, retry=tether.Backoff(base=0.01))
    def slow() -> str:
        tether.current_job().wait(5)
        return "late"

    job_id = slow.enqueue()
    with running(app, concurrency=2):
        wait_until(lambda: status(app, job_id) == "failed", timeout=15)
    job = app.get_job(job_id)
    assert job.failure_reason == "timeout" and job.failures == 2
    assert job.result is None
    assert "timed out" in (job.last_error or "")


def test_cancel_pending_and_running(make_app: MakeApp) -> None:
    app = make_app(lease_ttl=1.0)
    started = threading.Event()

    @app.task
    def long() -> None:
        started.set()
        job = tether.current_job()
        while True:
            job.check_cancelled()
            time.sleep(0.01)

    @app.task
    async def along() -> None:
        await asyncio.sleep(60)

    pending = long.enqueue(delay=60)
    assert app.cancel(pending) == "cancelled"
    assert status(app, pending) == "cancelled"
    sync_id, async_id = long.enqueue(), along.enqueue()
    with running(app, concurrency=2):
        wait_until(lambda: status(app, sync_id) == "running" and status(app, async_id) ==
                   "running")
        started.wait(5)
        assert app.cancel(sync_id) == "requested"
        assert app.cancel(async_id) == "requested"
        wait_until(lambda: status(app, sync_id) == "cancelled" and
                   status(app, async_id) == "cancelled", timeout=5)
    assert app.cancel(sync_id) == "finished"
