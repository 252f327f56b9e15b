"""Typed tasks at run time: ``JobId`` ids, ``task.options(...)`` enqueuers, the task's settings
as ``task.options.<name>``, and option keywords of ``enqueue`` as before."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

import tether

MakeApp = Callable[..., tether.App]


def test_options_make_a_typed_enqueuer(make_app: MakeApp) -> None:
    app = make_app()

    @app.task(queue="q1", priority=5, max_attempts=4)
    def add(a: int, b: int) -> int:
        return a + b

    assert (add.options.queue, add.options.priority, add.options.max_attempts) == ("q1", 5, 4)
    assert add.options.name == add.name and add.config.queue == "q1"
    later = add.options(delay=60, priority=-1, queue="q2", unique_key="k").enqueue(1, b=2)
    assert isinstance(later, tether.JobId) and isinstance(later, int)
    job = app.get_job(later)
    assert (job.queue, job.priority, job.unique_key, job.args, job.kwargs) == (
        "q2", -1, "k", [1], {"b": 2})
    assert (job.run_at - job.created_at).total_seconds() == pytest.approx(60, abs=2)
    assert add.options(unique_key="k").enqueue(9, 9) == later, "the unique key holds"
    at = datetime(2031, 1, 1, tzinfo=UTC)
    assert app.get_job(add.options(run_at=at).enqueue(1, 1)).run_at == at
    with pytest.raises(ValueError, match="not both"):
        add.options(delay=1, run_at=at).enqueue(1, 1)
    # the run-time keywords of enqueue keep working (typed code uses options())
    old = add.enqueue(1, 2, delay=30, priority=2)  # type: ignore[call-arg]
    assert app.get_job(old).priority == 2
    assert [type(i) for i in add.enqueue_many([((1, 2), {})])] == [tether.JobId]
    assert type(app.enqueue(add.name, 1, 2)) is tether.JobId
