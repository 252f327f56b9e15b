"""Typed tasks at run time: ``JobId`` ids, ``task.options(...)`` enqueuers, the task's settings
as ``task.options.<name>``, and option keywords of ``enqueue`` as before."""

from __future__ import annotations

import logging
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


def test_arguments_that_do_not_fit_fail_at_enqueue(make_app: Callable[..., tether.App],
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """Issue #24: wrong arguments raise TypeError in the producer, nothing is written, by
    every route that knows the task (its enqueue, enqueue_many, App.enqueue by name, a
    workflow step that receives its parents' result first); an unknown name warns once."""
    app = make_app()

    @app.task(name="fit.add")
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="fit.total")
    def total(values: list[int]) -> int:
        return sum(values)

    bad: list[Callable[[], object]] = [
        lambda: add.enqueue(1),  # type: ignore[call-arg]
        lambda: add.enqueue(1, 2, 3),  # type: ignore[call-arg]
        lambda: add.enqueue_many([((1,), {}), ((1, 2), {})]),
        lambda: app.enqueue("fit.add", 1, c=2),
        lambda: tether.chain(add.s(1, 2), add.s(1, 2)).enqueue(),  # piped: 3 arguments
        lambda: tether.chord([add.s(1, 2)], total.s(5)).enqueue(),
    ]
    for call in bad:
        with pytest.raises(TypeError, match=r"fit\.(add|total)\("):
            call()
    assert app.store.list_jobs(limit=10) == []
    ok = [add.enqueue(1, 2), app.enqueue("fit.add", a=1, b=2),
          tether.chain(add.s(1, 2), add.s(3)).enqueue().last]
    assert len(app.store.list_jobs(limit=10)) == 4 and len(ok) == 3

    with caplog.at_level(logging.WARNING, logger="tether.producer"):
        app.enqueue("fit.ad", 1, 2)
        app.enqueue("fit.ad", 1, 2)
    warned = [r.getMessage() for r in caplog.records if r.name == "tether.producer"]
    assert len(warned) == 1 and "'fit.ad'" in warned[0] and "did you mean 'fit.add'" in warned[0]
    producer = make_app()  # no tasks of its own: enqueues by name on purpose, no warning
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tether.producer"):
        producer.enqueue("fit.add", 1)
    assert not [r for r in caplog.records if r.name == "tether.producer"]


def test_enqueue_many_checks_every_job_not_only_the_first(make_app: MakeApp) -> None:
    """Issue #23: a batch's options are checked once (on its first job), but what differs
    per call, the arguments, their JSON and the limit key read from them, is checked for
    every job, and a refusal writes nothing; the store's own check of the batch
    (tether._limits.check_jobs) still refuses a later job whose fields differ."""
    from tether._limits import check_jobs
    from tether.stores import NewJob

    app = make_app()

    @app.task(name="many.keyed", limit_key="tenant")
    def keyed(tenant: str, n: int) -> None:
        return None

    with pytest.raises(TypeError, match="JSON-serializable"):
        keyed.enqueue_many([(("a", 1), {}), (("b", object()), {})])
    with pytest.raises(ValueError, match="limit_key"):
        keyed.enqueue_many([(("a", 1), {}), (("x" * 600, 2), {})])
    with pytest.raises(TypeError, match="limit key"):
        keyed.enqueue_many([(("a", 1), {}), ((2.5, 2), {})])
    assert app.store.list_jobs(limit=10) == []
    ids = keyed.enqueue_many([(("a", i), {}) for i in range(3)] + [(("b", 9), {})],
                             priority=2, delay=30)
    got = [app.store.get_job(i) for i in ids]
    assert [(j.limit_key, j.payload, j.priority) for j in got if j] == [
        ("a", '[["a",0],{}]', 2), ("a", '[["a",1],{}]', 2), ("a", '[["a",2],{}]', 2),
        ("b", '[["b",9],{}]', 2)]
    first = NewJob("t", priority=1)
    for bad in (NewJob("t", priority=True), NewJob("t", payload="\ud800"),  # type: ignore[arg-type]
                NewJob("t", limit_key="\x00")):
        with pytest.raises((ValueError, TypeError), match="job 1 of the batch"):
            check_jobs([first, bad])
