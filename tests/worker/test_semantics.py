"""Worker and API semantics of issue #8 (items H and I), with a real worker on every store.

* A job of a task this worker does not know is handed back (a rolling deploy), and only
  dead-lettered once no worker has known the task for ``unknown_task_timeout``.
* A task argument named like an enqueue option is never silently taken as the option.
* A healthy run reports no lost lease (the heartbeat/finish race).
* Bad input at registration and at enqueue gets one error naming the field.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import pytest

import tether
from tests.worker.helpers import running, status, wait_until
from tether._errors import ConfigError
from tether._events import Event

pytestmark = pytest.mark.timeout(120)
MakeApp = Callable[..., tether.App]


# -- unknown tasks (rolling deploys) ----------------------------------------------------------

def _unknown_records(app: tether.App, job_id: int) -> list[dict[str, Any]]:
    return [r for r in app.get_job(job_id).errors if r["reason"] == "unknown_task"]


@pytest.mark.slow
def test_a_job_of_an_unknown_task_is_handed_back_then_run_by_a_worker_that_knows_it(
    make_app: MakeApp, caplog: pytest.LogCaptureFixture
) -> None:
    old = make_app()  # an old worker: it does not know the new task yet
    a = old.enqueue("jobs.new_task", 1)
    b = old.enqueue("jobs.new_task", 2)
    with caplog.at_level(logging.WARNING, logger="tether"), running(old, concurrency=2):
        wait_until(lambda: _unknown_records(old, a) and _unknown_records(old, b),
                   what="both jobs handed back")
    for job_id in (a, b):
        job = old.get_job(job_id)
        assert job.status == "pending", job
        assert (job.failures, job.stall_count, job.failure_reason) == (0, 0, None), job
        assert job.interruptions >= 1 and job.locked_by is None
        assert job.started_at is not None
        assert job.run_at > job.started_at, "handed back due at once: it would spin"
    warnings = [r for r in caplog.records if "jobs.new_task" in r.getMessage()
                and r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]  # once per task name

    new = make_app()  # the new release: it knows the task

    @new.task(name="jobs.new_task")
    def new_task(x: int) -> int:
        return x * 10

    with running(new, concurrency=2):
        wait_until(lambda: status(new, a) == "done" and status(new, b) == "done",
                   timeout=30, what="the new worker to run them")
    assert new.get_job(a).result == 10


def test_a_task_nobody_knows_is_dead_lettered_after_unknown_task_timeout(
    make_app: MakeApp,
) -> None:
    app = make_app(unknown_task_timeout=0.5)
    job_id = app.enqueue("jobs.gone_for_good")
    with running(app, concurrency=1):
        wait_until(lambda: status(app, job_id) == "failed", timeout=20, what="dead-lettered")
    job = app.get_job(job_id)
    assert job.failure_reason == "unknown_task"
    assert job.attempt >= 2, "dead-lettered at the first claim, not after the timeout"
    records = job.errors
    assert records[0]["reason"] == "unknown_task"
    assert (records[-1]["at"] - records[0]["at"]).total_seconds() >= 0.5
    assert "jobs.gone_for_good" in (job.last_error or "")


def test_unknown_task_timeout_is_validated(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    assert tether.App(url).runtime.settings.unknown_task_timeout == 3600
    for bad in (-1, float("nan"), "1h"):
        with pytest.raises(ConfigError, match="unknown_task_timeout must be"):
            tether.App(url, unknown_task_timeout=bad)


# -- arguments named like enqueue options -----------------------------------------------------

def test_an_argument_named_like_an_option_is_never_dropped(make_app: MakeApp) -> None:
    app = make_app()

    @app.task
    def notify(user: int, delay: float = 0.0, queue: str = "inbox") -> None: ...

    with pytest.raises(TypeError, match="enqueue_with"):
        notify.enqueue(7, delay=5)
    with pytest.raises(TypeError, match="queue"):
        notify.enqueue(7, queue="other")
    assert app.store.list_jobs() == []

    job = app.get_job(notify.enqueue_with(args=(7,), kwargs={"delay": 5, "queue": "x"},
                                          delay=60, priority=2))
    assert (job.args, job.kwargs) == ([7], {"delay": 5, "queue": "x"})
    assert job.priority == 2 and job.queue == "default"
    assert (job.run_at - job.created_at).total_seconds() == pytest.approx(60, abs=2)

    by_name = app.get_job(app.enqueue(notify.name, 8, kwargs={"delay": 1}, priority=3))
    assert (by_name.args, by_name.kwargs, by_name.priority) == ([8], {"delay": 1}, 3)
    remote = app.get_job(app.enqueue("remote.task", kwargs={"run_at": 1, "conn": "x"}))
    assert (remote.task, remote.kwargs) == ("remote.task", {"run_at": 1, "conn": "x"})
    # By name, the job's budgets are options too (a producer without the task's code).
    budget = app.get_job(app.enqueue("remote.task", 1, max_attempts=2, max_stalls=1, x=3))
    assert (budget.max_attempts, budget.max_stalls, budget.kwargs) == (2, 1, {"x": 3})
    known = app.get_job(app.enqueue(notify.name, 9, max_attempts=2))
    assert (known.max_attempts, known.kwargs, known.queue) == (2, {}, "default")
    # Options that are not parameters of the function stay options, as before.

    @app.task
    def plain(x: int) -> None: ...

    later = app.get_job(plain.enqueue(1, delay=30, priority=4))
    assert later.kwargs == {} and later.priority == 4
    assert (later.run_at - later.created_at).total_seconds() == pytest.approx(30, abs=2)
    ids = plain.enqueue_many([((1,), {}), ((2,), {})])
    assert [app.get_job(i).args for i in ids] == [[1], [2]]


# -- no false lost leases on a healthy run ----------------------------------------------------

@pytest.mark.slow
def test_a_healthy_drain_reports_no_lost_lease(make_app: MakeApp) -> None:
    """Many no-op jobs, a heartbeat every few milliseconds: outcomes land between a
    heartbeat's snapshot of the leases and its reply all the time. None of them was lost."""
    app = make_app(lease_ttl=2.0, heartbeat_interval=0.005)
    lost: list[Event] = []
    app.on("lease_lost", lost.append)
    # Only heartbeats that carried leases can race an outcome. How many land inside one batch's
    # drain depends on the machine (SQLite's write lock serializes them with the claims and
    # finishes: 18-50 per 3,000 jobs were seen), so drain batches until enough overlapped.
    overlapping: list[Event] = []
    app.on("heartbeat", lambda e: overlapping.append(e) if e.detail["leases"] else None)

    @app.task
    def noop() -> None:
        return None

    n = 3000
    total = 0

    def done() -> bool:
        return sum(c.count for c in app.store.counts() if c.status == "done") == total

    with running(app, concurrency=8):
        for _ in range(10):
            noop.enqueue_many([((), {}) for _ in range(n)])
            total += n
            wait_until(done, timeout=100, what=f"{total} jobs done")
            if len(overlapping) > 20:
                break
        assert len(overlapping) > 20, "too few heartbeats overlapped the drains"
    assert [(e.job_id, e.detail) for e in lost] == []


# -- one clear error for bad input ------------------------------------------------------------

def test_bad_task_registration_is_one_config_error(make_app: MakeApp) -> None:
    app = make_app()
    with pytest.raises(ConfigError, match="task name"):
        app.task(name="")(lambda: None)
    with pytest.raises(ConfigError, match="priority"):
        app.task(name="p", priority="x")(lambda: None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="queue"):
        app.task(name="q", queue="a\x00b")(lambda: None)
    assert app.runtime.registry.tasks == {}


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"run_at": math.inf}, "run_at"),
        ({"run_at": math.nan}, "run_at"),
        ({"run_at": 1e300}, "run_at"),
        ({"delay": 1e300}, "delay"),
        ({"delay": math.inf}, "delay"),
        ({"priority": 2**63}, "priority"),
        ({"priority": -(2**63) - 1}, "priority"),
        ({"queue": "a\x00b"}, "queue"),
        ({"queue": "q" * 256}, "queue"),
        ({"unique_key": "k" * 513}, "unique_key"),
        ({"unique_key": "k\udcff"}, "unique_key"),
    ],
)
def test_bad_enqueue_input_is_one_value_error_naming_the_field(
    make_app: MakeApp, options: dict[str, Any], field: str
) -> None:
    app = make_app()

    @app.task
    def resize(path: str) -> None: ...

    with pytest.raises(ValueError, match=field) as info:
        resize.enqueue("a.png", **options)
    assert type(info.value) is ValueError
    if field != "unique_key":  # a batch shares its other options
        with pytest.raises(ValueError, match=field):
            resize.enqueue_many([(("a.png",), {})], **options)
    with pytest.raises(ValueError, match=field):
        app.enqueue(resize.name, "a.png", **options)
    assert app.store.list_jobs() == []
