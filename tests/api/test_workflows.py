"""Workflows from the API (issue #20): ``after=`` and ``allow_failure=`` on every enqueue path,
``current_job().parents`` / ``parent_results()``, signatures and ``chain`` / ``group`` /
``chord``, and the payload's ``pipe`` decoded by the worker, on every store (run with
``drain``: the real worker, claim and fenced finish)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

import tether
from tether.testing import drain

MakeApp = Callable[..., tether.App]


@dataclass
class Point:
    x: int
    y: int


def tasks(app: tether.App) -> dict[str, tether.Task[..., Any]]:
    @app.task(name="wf.add")
    def add(x: int, y: int = 0) -> int:
        return x + y

    @app.task(name="wf.total")
    def total(xs: list[int | None], bonus: int = 0) -> int:
        return sum(x or 0 for x in xs) + bonus

    @app.task(name="wf.point")
    def point(x: int) -> Point:
        return Point(x, x * 2)

    @app.task(name="wf.norm")
    def norm(p: Point) -> int:
        assert isinstance(p, Point), "the piped value is decoded by the parameter's annotation"
        return p.x + p.y

    @app.task(name="wf.fail", max_attempts=1)
    def fail() -> int:
        raise RuntimeError("kaput")

    @app.task(name="wf.look")
    def look() -> dict[str, Any]:
        job = tether.current_job()
        return {"parents": list(job.parents), "results": job.parent_results()}

    @app.task(name="wf.const")
    def const() -> str:
        return "k"

    return {"add": add, "total": total, "point": point, "norm": norm, "fail": fail,
            "look": look, "const": const}


def test_after_waits_and_parent_results_come_in_after_order(make_app: MakeApp) -> None:
    app = make_app()
    t = tasks(app)
    a = t["add"].enqueue(1, 2)
    b = t["point"].enqueue(5)
    child = t["look"].enqueue_with(after=[b, a, b])  # duplicates count once, order kept
    assert app.get_job(child).status == "waiting"
    assert app.store.job_links(child).parents == (b, a)
    drain(app)
    assert app.wait(child, timeout=10) == {"parents": [b, a], "results": [
        {"x": 5, "y": 10}, 3]}
    # parent_results() decodes by the parent's return annotation (Point), JSON'd back here


def test_parent_results_decode_by_the_parents_annotation(make_app: MakeApp) -> None:
    app = make_app()
    t = tasks(app)
    seen: list[Any] = []

    @app.task(name="wf.check")
    def check() -> None:
        seen.extend(tether.current_job().parent_results())

    p = t["point"].enqueue(2)
    check.enqueue(after=p)  # type: ignore[call-arg]  # a lone id, as a run-time option
    drain(app)
    assert seen == [Point(2, 4)]


def test_every_enqueue_path_takes_after(make_app: MakeApp) -> None:
    app = make_app()
    t = tasks(app)
    root = t["add"].enqueue(1)
    ids = [
        t["add"].enqueue(1, after=[root]),  # type: ignore[call-arg]
        t["add"].enqueue_with((1,), after=root, allow_failure=True),
        t["add"].options(after=[root]).enqueue(2),
        *t["add"].enqueue_many([((3,), {}), ((4,), {})], after=[root]),
        app.enqueue("wf.add", 5, after=[root]),
    ]

    async def more() -> list[int]:
        return [await t["add"].aenqueue(6, after=[root]),  # type: ignore[call-arg]
                await t["add"].options(after=[root]).aenqueue(7),
                *await t["add"].aenqueue_many([((8,), {})], after=[root])]

    ids += asyncio.run(more())
    assert {app.get_job(i).status for i in ids} == {"waiting"}
    assert app.store.job_links(ids[1]).allow_failure is True
    assert app.store.job_links(root).children == tuple(sorted(ids))
    drain(app)
    assert {app.get_job(i).status for i in [root, *ids]} == {"done"}


def test_bad_after_is_refused_before_anything_is_written(make_app: MakeApp) -> None:
    app = make_app()
    t = tasks(app)
    root = t["add"].enqueue(1)
    with pytest.raises(TypeError, match="after must"):
        t["add"].enqueue_with((1,), after=["x"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="after must"):
        t["add"].enqueue_with((1,), after=[True])
    with pytest.raises(ValueError, match="job id"):
        t["add"].enqueue_with((1,), after=[0])
    with pytest.raises(ValueError, match="at most 10000"):
        t["add"].enqueue_with((1,), after=range(1, 10_002))
    with pytest.raises(TypeError, match="allow_failure"):
        t["add"].enqueue_with((1,), after=[root], allow_failure=1)  # type: ignore[arg-type]
    with pytest.raises(tether.JobNotFound):
        t["add"].enqueue_many([((1,), {}), ((2,), {})], after=[root, root + 10_000])
    assert [j.id for j in app.store.list_jobs(limit=10)] == [root]


def test_after_is_a_reserved_option_name(make_app: MakeApp) -> None:
    app = make_app()

    @app.task(name="wf.clash")
    def clash(after: int) -> int:
        return after

    with pytest.raises(TypeError, match="also an enqueue option"):
        clash.enqueue(after=3)
    job = clash.enqueue_with(kwargs={"after": 3})
    drain(app)
    assert app.wait(job, timeout=10) == 3


def test_chain_pipes_each_result_into_the_next_step(make_app: MakeApp) -> None:
    app = make_app()
    t = tasks(app)
    run = tether.chain(t["add"].s(1, 2), t["add"].s(10), t["add"].s(y=100)).enqueue()
    assert len(run.ids) == 3 and run.leaves == (run.last,) == (run.ids[-1],)
    first, second, third = (app.store.get_job(i) for i in run.ids)
    assert first is not None and second is not None and third is not None
    assert (first.status, second.status, third.status) == ("pending", "waiting", "waiting")
    assert json.loads(second.payload) == [[10], {}, {"pipe": "one"}]
    assert json.loads(third.payload) == [[], {"y": 100}, {"pipe": "one"}]
    assert app.store.job_links(third.id).parents == (second.id,)
    drain(app)
    assert app.wait(run.last, timeout=10) == 113
    assert app.get_job(second.id).args == [10], "the job view shows the stored arguments"


def test_the_piped_value_is_decoded_by_the_steps_annotation(make_app: MakeApp) -> None:
    app = make_app()
    t = tasks(app)
    run = tether.chain(t["point"].s(3), t["norm"].s()).enqueue()
    drain(app, raise_on_failure=True)
    assert app.wait(run.last, timeout=10) == 9


def test_chord_gives_the_callback_every_result_in_member_order(make_app: MakeApp) -> None:
    app = make_app()
    t = tasks(app)
    run = tether.chord([t["add"].s(i, i) for i in range(5)], t["total"].s(bonus=1000)).enqueue()
    members = run.ids[:5]
    assert app.store.job_links(run.last).parents == members
    callback = app.store.get_job(run.last)
    assert callback is not None and json.loads(callback.payload)[2] == {"pipe": "all"}
    drain(app)
    assert app.wait(run.last, timeout=10) == 1020
    # a chain ending in a group is a chord
    run2 = tether.chain(tether.group(t["add"].s(1), t["add"].s(2)), t["total"].s()).enqueue()
    drain(app)
    assert app.wait(run2.last, timeout=10) == 3


def test_nested_workflows_and_immutable_signatures(make_app: MakeApp) -> None:
    app = make_app()
    t = tasks(app)
    wf = tether.chain(
        t["add"].s(1, 1),                                    # 2
        tether.group(t["add"].s(10),                         # 12
                     t["const"].si(),                        # "k": not given the 2
                     tether.chain(t["add"].s(100), t["add"].s(1000))),  # 102, 1102
        t["look"].si(),
    )
    run = wf.enqueue()
    assert len(run.ids) == 6
    drain(app, raise_on_failure=True)
    out = app.wait(run.last, timeout=10)
    assert out["results"] == [12, "k", 1102]
    group_leaves = [run.ids[1], run.ids[2], run.ids[4]]
    assert out["parents"] == group_leaves


def test_group_enqueues_in_one_batch_and_reports_every_leaf(make_app: MakeApp) -> None:
    app = make_app()
    t = tasks(app)
    calls: list[int] = []
    runtime = app.runtime
    real = runtime.enqueue_jobs

    def counting(jobs: Any, *, conn: Any = None) -> list[int]:
        calls.append(len(jobs))
        return real(jobs, conn=conn)

    runtime.enqueue_jobs = counting  # type: ignore[method-assign]
    try:
        run = tether.group(t["add"].s(i) for i in range(50)).enqueue()
        chord = tether.chord(tether.group(t["add"].s(i) for i in range(20)),
                             t["total"].s()).enqueue()
        chain = tether.chain(*(t["add"].s(1) for _ in range(4))).enqueue()
    finally:
        runtime.enqueue_jobs = real  # type: ignore[method-assign]
    assert calls == [50, 20, 1, 1, 1, 1, 1], "one round trip per level of the workflow"
    assert len(run.leaves) == 50 and run.ids == run.leaves
    with pytest.raises(ValueError, match="ends in 50 jobs"):
        _ = run.last
    drain(app)
    assert app.wait(chord.last, timeout=10) == sum(range(20))
    assert app.wait(chain.last, timeout=10) == 4


def test_a_failed_step_cancels_the_rest_and_allow_failure_runs_anyway(
        make_app: MakeApp) -> None:
    app = make_app()
    t = tasks(app)
    broken = tether.chain(t["fail"].s(), t["add"].s(1), t["add"].s(2)).enqueue()
    tolerant = tether.chord([t["add"].s(1), t["fail"].s(), t["add"].s(2)],
                            t["total"].s().set(allow_failure=True)).enqueue()
    drain(app)
    for job_id in broken.ids[1:]:
        job = app.get_job(job_id)
        assert (job.status, job.failure_reason) == ("cancelled", "dependency_failed")
    with pytest.raises(tether.JobWasCancelled):
        app.wait(broken.last, timeout=10)
    assert f"job {broken.ids[0]} ended failed" in (app.get_job(broken.ids[1]).last_error or "")
    assert app.wait(tolerant.last, timeout=10) == 3, "the failed member's result is None"


def test_after_existing_jobs_and_parents_without_results(make_app: MakeApp) -> None:
    app = make_app()
    t = tasks(app)
    root = t["add"].enqueue(7)
    run = tether.chain(t["look"].s(), t["const"].si()).enqueue(after=[root])
    first = app.store.get_job(run.ids[0])
    assert first is not None and len(json.loads(first.payload)) == 2, "not given root's result"
    sig = t["look"].s().enqueue(after=root)
    assert isinstance(sig, tether.JobId)
    drain(app, raise_on_failure=True)
    assert app.wait(sig, timeout=10) == {"parents": [root], "results": [7]}
    assert app.wait(run.ids[0], timeout=10) == {"parents": [root], "results": [7]}
    assert app.wait(run.last, timeout=10) == "k"


def test_canvas_input_errors(make_app: MakeApp) -> None:
    app = make_app()
    other = make_app()
    t = tasks(app)

    @other.task(name="wf.elsewhere")
    def elsewhere(piped: int) -> None: ...

    with pytest.raises(ValueError, match="at least one"):
        tether.chain()
    with pytest.raises(ValueError, match="at least one"):
        tether.group([])
    with pytest.raises(TypeError, match="takes signatures"):
        tether.chain(t["add"].s(1), 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="after= and conn= go to enqueue"):
        t["add"].s(1).set(after=[1])
    with pytest.raises(ValueError, match="another app"):
        tether.chain(t["add"].s(1), elsewhere.s()).enqueue()
    with pytest.raises(TypeError, match="JSON"):  # step 3's argument: nothing written
        tether.chain(t["add"].s(1), t["add"].s(2), t["add"].s(object())).enqueue()
    assert app.store.list_jobs(limit=10) == []
    assert repr(tether.chord([t["add"].s(1)], t["total"].si())) == \
        "chord(group(wf.add.s(1)), wf.total.si())"


def test_async_enqueue_of_a_workflow(make_app: MakeApp) -> None:
    app = make_app()
    t = tasks(app)

    async def go() -> tether.WorkflowIds:
        one = await t["add"].s(1).aenqueue()
        return await tether.chain(t["add"].s(2), t["add"].s(3)).aenqueue(after=[one])

    run = asyncio.run(go())
    drain(app)
    assert app.wait(run.last, timeout=10) == 5


def test_an_unknown_pipe_is_dead_lettered_as_bad_arguments(make_app: MakeApp) -> None:
    app = make_app()
    t = tasks(app)
    root = t["add"].enqueue(1)
    from dataclasses import replace

    job = t["add"].new_job((1,), {}, after=[root])
    job = replace(job, payload=json.dumps([[1], {}, {"pipe": "some"}]))
    (bad,) = app.enqueue_jobs([job])
    drain(app)
    got = app.get_job(bad)
    assert (got.status, got.failure_reason) == ("failed", "bad_arguments")
    assert "pipe 'some'" in (got.last_error or "")
