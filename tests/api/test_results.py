"""Waiting for results: ``app.wait`` and ``await app.await_result`` return the decoded result,
raise JobFailed / JobWasCancelled with the job's view, and TimeoutError after the timeout; they
are woken by the store's completion notification, not a busy poll."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import tether
from tests.worker.helpers import running

pytestmark = pytest.mark.timeout(60)
MakeApp = Callable[..., tether.App]


def tasks(app: tether.App) -> tuple[Any, Any, Any]:
    release = threading.Event()

    @app.task
    def later(at: datetime, days: int) -> datetime:
        return at + timedelta(days=days)

    @app.task(max_attempts=1)
    def broken(why: str) -> None:
        raise ValueError(f"broken: {why}")

    @app.task
    def held() -> str:
        release.wait(20)
        return "released"

    held.release = release  # type: ignore[attr-defined]
    return later, broken, held


def test_wait_returns_the_decoded_result(make_app: MakeApp) -> None:
    app = make_app()
    later, _, _ = tasks(app)
    at = datetime(2026, 11, 23, tzinfo=UTC)
    job_id = later.enqueue(at, 2)
    with running(app, concurrency=1):
        result = app.wait(job_id, timeout=20)
    assert result == at + timedelta(days=2) and type(result) is datetime
    assert app.wait(job_id) == result, "a finished job answers at once"
    assert app.wait(int(job_id), timeout=0) == result, "a plain int id works too"


def test_a_dead_lettered_job_raises_job_failed_with_its_view(make_app: MakeApp) -> None:
    app = make_app()
    _, broken, _ = tasks(app)
    job_id = broken.enqueue("on purpose")
    with running(app, concurrency=1), pytest.raises(tether.JobFailed) as caught:
        app.wait(job_id, timeout=20)
    failed = caught.value
    assert not isinstance(failed, tether.JobWasCancelled)
    assert failed.reason == "error" and failed.job.status == "failed"
    assert failed.job.id == job_id and isinstance(failed.job, tether.Job)
    assert (failed.last_error or "").startswith("ValueError: broken: on purpose")
    assert str(failed).startswith(f"job {job_id} ")
    assert "ValueError: broken: on purpose" in str(failed)


def test_a_cancelled_job_raises_job_was_cancelled(make_app: MakeApp) -> None:
    app = make_app()
    later, _, _ = tasks(app)
    job_id = later.enqueue(datetime(2026, 1, 1, tzinfo=UTC), 1)
    assert app.cancel(job_id) == "cancelled"
    with pytest.raises(tether.JobWasCancelled) as caught:
        app.wait(job_id, timeout=5)
    assert isinstance(caught.value, tether.JobFailed) and caught.value.job.status == "cancelled"
    assert "was cancelled" in str(caught.value)


def test_timeout_and_unknown_ids(make_app: MakeApp) -> None:
    app = make_app()
    later, _, _ = tasks(app)
    job_id = later.enqueue(datetime(2026, 1, 1, tzinfo=UTC), 1)  # no worker runs it
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=f"job {job_id} did not finish within 0.3s"):
        app.wait(job_id, timeout=0.3)
    assert 0.3 <= time.monotonic() - start < 15, "a timed-out wait returns near its timeout"
    with pytest.raises(tether.JobNotFound):
        app.wait(job_id + 1000, timeout=1)
    for bad in (-1, float("nan"), True, "5"):
        with pytest.raises(ValueError, match="timeout"):
            app.wait(job_id, timeout=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout"):
            asyncio.run(app.await_result(job_id, timeout=bad))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="job_id must be an int"):
        app.wait("1", timeout=1)  # type: ignore[call-overload]
    with pytest.raises(TimeoutError):
        app.wait(job_id, timeout=0)


def test_a_waiter_is_woken_by_the_finish_not_by_its_next_poll(
    make_app: MakeApp, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The job finishes while the waiter blocks in ``wait_for_finish``; the waiter's own
    re-read interval is made 60 s, so a return within the test's timeout can only be the
    store's wake-up (a notification; SQLite's 50 ms status poll)."""
    from tether import _results as results

    monkeypatch.setattr(results, "WAKE_EVERY", 60.0)
    app = make_app()
    _, _, held = tasks(app)
    job_id = held.enqueue()
    blocking = threading.Event()
    real_wait = app.store.wait_for_finish

    def watched(ids: Any, timeout: float) -> bool:
        blocking.set()
        return real_wait(ids, timeout)

    monkeypatch.setattr(app.store, "wait_for_finish", watched)
    with running(app, concurrency=1):
        from tests.worker.helpers import wait_until

        wait_until(lambda: app.get_job(job_id).status == "running", 10, "the job to start")
        got: list[tuple[float, str]] = []
        waiter = threading.Thread(target=lambda: got.append(
            (time.monotonic(), app.wait(job_id, timeout=120))))
        waiter.start()
        assert blocking.wait(20), "the waiter never blocked in wait_for_finish"
        released = time.monotonic()
        held.release.set()
        waiter.join(50)
    assert got and got[0][1] == "released"
    assert got[0][0] - released < 30, f"woke {got[0][0] - released:.2f}s after the finish"


def test_await_result_under_an_event_loop(make_app: MakeApp) -> None:
    app = make_app()
    later, broken, _ = tasks(app)
    at = datetime(2026, 11, 23, tzinfo=UTC)

    async def main() -> None:
        good = await later.aenqueue(at, 3)
        bad = await broken.aenqueue("async")
        assert await app.await_result(good, timeout=20) == at + timedelta(days=3)
        with pytest.raises(tether.JobFailed, match="broken: async"):
            await app.await_result(bad, timeout=20)
        pending = await later.aenqueue(at, 1)
        await app.acancel(pending)
        # the worker may have claimed it first: cancelled either way, or run to the end
        try:
            await app.await_result(pending, timeout=20)
        except tether.JobWasCancelled as exc:
            assert exc.job.status == "cancelled"
        with pytest.raises(tether.JobNotFound):
            await app.await_result(10_000, timeout=1)

    with running(app, concurrency=1):
        asyncio.run(main())

    async def times_out() -> None:
        never = await later.aenqueue(at, 1)
        with pytest.raises(TimeoutError):
            await app.await_result(never, timeout=0.2)
        await app.aclose()

    asyncio.run(times_out())


def test_a_result_the_return_annotation_refuses_is_one_clear_error(make_app: MakeApp) -> None:
    """The handler said ``-> datetime`` but returned text that is no datetime: ``wait`` must
    not hand back the raw JSON typed as a datetime; it raises ResultNotDecodable naming the
    job, the type and the codec's refusal, and carrying the view (whose result stays the
    plain JSON, as ``get_job`` shows it)."""
    from tether import ResultNotDecodable

    app = make_app()

    @app.task
    def stamp() -> datetime:
        return "not a date"  # type: ignore[return-value]  # the defect under test

    job_id = stamp.enqueue()
    with running(app, concurrency=1), pytest.raises(ResultNotDecodable) as caught:
        app.wait(job_id, timeout=20)
    error = caught.value
    assert isinstance(error, TypeError) and error.job.status == "done"
    assert error.job.result == "not a date" and app.get_job(job_id).result == "not a date"
    assert f"job {job_id}" in str(error) and "datetime" in str(error)
    assert "not a date" in str(error)

    async def main() -> None:
        with pytest.raises(ResultNotDecodable, match="datetime"):
            await app.await_result(job_id, timeout=5)
        await app.aclose()

    asyncio.run(main())


def test_a_retried_job_returns_the_result_of_the_attempt_that_succeeded(
    make_app: MakeApp,
) -> None:
    app = make_app()
    attempts: list[int] = []

    @app.task(max_attempts=3, retry=tether.Backoff(base=0.01, factor=1.0, max=0.01, jitter=0))
    def flaky() -> int:
        attempts.append(tether.current_job().attempt)
        if len(attempts) == 1:
            raise RuntimeError("first attempt fails")
        return len(attempts)

    job_id = flaky.enqueue()
    with running(app, concurrency=1):
        assert app.wait(job_id, timeout=30) == 2
    assert attempts == [1, 2] and app.get_job(job_id).failures == 1


def test_waiting_for_a_pruned_job_says_it_may_have_been_pruned(make_app: MakeApp) -> None:
    """A finished job whose row the retention pruned is gone: ``wait`` cannot return its
    result and says why that may be, not just "no job"."""
    app = make_app()

    @app.task
    def one() -> int:
        return 1

    job_id = one.enqueue()
    with running(app, concurrency=1):
        assert app.wait(job_id, timeout=30) == 1
    store = app.store
    assert store.prune("done", 0.0, now=store.now() + 1.0) == 1
    for wait in (lambda: app.wait(job_id, timeout=5),
                 lambda: asyncio.run(app.await_result(job_id, timeout=5))):
        with pytest.raises(tether.JobNotFound, match="pruned") as caught:
            wait()
        assert caught.value.job_id == job_id and f"no job with id {job_id}" in str(caught.value)
    asyncio.run(app.aclose())
