"""``app.get_job`` returns the public view: Python values and aware UTC datetimes; the store
record (JSON text, epoch floats) stays behind the store seam."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

import tether
from tests.worker.helpers import running, wait_until
from tether.stores import JobRecord

pytestmark = pytest.mark.timeout(60)
MakeApp = Callable[..., tether.App]
FAST = tether.Backoff(base=0.01, factor=1.0, max=0.01, jitter=0.0)


def test_the_view_holds_python_values_and_aware_times(make_app: MakeApp) -> None:
    app = make_app()
    calls: list[int] = []

    @app.task(max_attempts=3, retry=FAST, queue="views", priority=-2)
    def total(prices: list[Decimal], *, at: datetime) -> Decimal:
        calls.append(1)
        tether.current_job().set_progress({"step": len(calls)})
        if len(calls) == 1:
            raise RuntimeError("first try fails")
        return sum(prices, Decimal(0))

    at = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    job_id = total.enqueue([Decimal("1.10"), Decimal("2.20")], at=at)
    pending = app.get_job(job_id)
    assert type(pending) is tether.Job and not isinstance(pending, JobRecord)
    assert (pending.status, pending.result, pending.finished) == ("pending", None, False)
    assert pending.args == [[Decimal("1.10"), Decimal("2.20")]] and pending.kwargs == {"at": at}
    assert (pending.queue, pending.priority, pending.attempt) == ("views", -2, 0)
    assert pending.started_at is None and pending.lease_until is None
    for when in (pending.created_at, pending.run_at):
        assert when.tzinfo is UTC
        assert abs(datetime.now(UTC) - when) < timedelta(minutes=1)

    with running(app, concurrency=1):
        wait_until(lambda: app.get_job(job_id).finished, what="the job")
    job = app.get_job(job_id)
    assert (job.status, job.result, job.attempt, job.failures) == ("done", Decimal("3.30"), 2, 1)
    assert job.progress == {"step": 2}
    assert job.finished_at is not None and job.started_at is not None
    assert job.created_at <= job.started_at <= job.finished_at
    [error] = job.errors
    assert (error["attempt"], error["reason"]) == (1, "error")
    assert isinstance(error["at"], datetime) and error["at"].tzinfo is UTC
    assert "first try fails" in error["error"] and job.last_error == error["error"]
    assert (job.failure_reason, job.unique_key, job.cancel_requested) == (None, None, False)
    assert (job.result_value, job.error_history) == (job.result, job.errors)  # older names


def test_a_job_of_a_task_the_app_does_not_know_shows_plain_json(make_app: MakeApp) -> None:
    producer = make_app()
    job_id = producer.enqueue("elsewhere.task", datetime(2026, 1, 1, tzinfo=UTC),
                              unique_key="u1", kwargs={"n": Decimal("1.5")})
    job = producer.get_job(job_id)
    assert job.args == ["2026-01-01T00:00:00+00:00"] and job.kwargs == {"n": "1.5"}
    assert (job.task, job.unique_key) == ("elsewhere.task", "u1")
    assert producer.cancel(job_id) == "cancelled"
    cancelled = producer.get_job(job_id)
    assert cancelled.status == "cancelled" and cancelled.finished
    with pytest.raises(tether.JobNotFound):
        producer.get_job(job_id + 1000)


def test_the_public_job_is_the_view() -> None:
    assert tether.Job is tether._jobview.Job
    assert "Job" in tether.__all__ and "JobId" in tether.__all__
    assert tether.JobId(5) == 5 and f"{tether.JobId(5)}" == "5" and str(tether.JobId(5)) == "5"
