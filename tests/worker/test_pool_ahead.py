"""Jobs sent ahead to a process-pool child (the worker in-process, children real processes):
a job waiting in a child is withdrawn when it is cancelled, never started, and its child is not
killed; a timeout counts from the start in the child, not from the claim or the send.

``sendahead.PATIENCE`` is raised for these tests so that nothing is released for waiting behind a
slow handler, and every task counts as quick so that jobs go ahead behind the slow one: here
the jobs must stay queued in the child (tests/crash/test_pool_ahead.py covers the release, and
that nothing goes ahead behind a task with no duration history or a recent crash)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import tether
from tests.worker.helpers import running, wait_until
from tests.worker.pool_tasks import register, starts
from tether._events import Event
from tether._worker.processes import sendahead

pytestmark = pytest.mark.timeout(60)
MakeApp = Callable[..., tether.App]
SPEC = "tests.worker.pool_tasks:app"


@pytest.fixture(autouse=True)
def patient(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sendahead, "PATIENCE", 30.0)
    monkeypatch.setattr(sendahead.Ahead, "quick", lambda self, task, now: True)


@pytest.mark.slow
def test_a_cancelled_job_waiting_in_a_child_is_withdrawn_and_never_starts(
    make_app: MakeApp, tmp_path: Path
) -> None:
    app = make_app()
    register(app)
    log = str(tmp_path / "starts.log")
    exited: list[Event] = []
    app.on("child_exited", exited.append)
    slow = app.runtime.registry.tasks["pool.nap"].enqueue(3.0, log)
    victim = app.runtime.registry.tasks["pool.nap"].enqueue(0.0, log)
    after = app.runtime.registry.tasks["pool.nap"].enqueue(0.0, log)
    with running(app, concurrency=1, pool="process", app_spec=SPEC) as worker:
        wait_until(lambda: [s for s in starts(log) if s[0] == slow], 20, "the slow job to start")
        [child] = worker.pool.pids()
        held = worker.pool.fleet.children[0]
        wait_until(lambda: held.entry is not None, 5, "the worker to learn of the start")
        assert [e.ctx.id for e in held.ahead] == [victim, after], "both were sent ahead"
        assert app.cancel(victim) == "requested"
        wait_until(lambda: app.get_job(victim).status == "cancelled", 10, "the cancel")
        assert app.get_job(slow).status == "running", "withdrawn while the child ran another"
        wait_until(lambda: app.get_job(after).status == "done", 20, "the job behind it")
        assert app.get_job(slow).status == "done"
        assert worker.pool.pids() == [child]
    ran = {(j, a) for j, a, _ in starts(log)}
    assert ran == {(slow, 1), (after, 1)}, "the withdrawn job never started"
    final = app.get_job(victim)
    assert (final.attempt, final.failures, final.stall_count) == (1, 0, 0)
    assert final.last_error == "cancelled on request"
    assert {s[2] for s in starts(log)} == {child}
    assert not [e for e in exited if e.job_id is not None], "no child was killed"


@pytest.mark.slow
def test_the_timeout_counts_from_the_start_in_the_child(
    make_app: MakeApp, tmp_path: Path
) -> None:
    # pool.timed has timeout=1 and runs 0.4 s, after 1.5 s queued behind pool.nap in the only
    # child: counted from the claim or the send it would time out; from its start it may not.
    app = make_app()
    register(app)
    log = str(tmp_path / "starts.log")
    slow = app.runtime.registry.tasks["pool.nap"].enqueue(1.5, log)
    timed = app.runtime.registry.tasks["pool.timed"].enqueue(0.4, log)
    with running(app, concurrency=1, pool="process", app_spec=SPEC) as worker:
        wait_until(lambda: [s for s in starts(log) if s[0] == slow], 20, "the slow job to start")
        held = worker.pool.fleet.children[0]
        wait_until(lambda: held.entry is not None, 5, "the worker to learn of the start")
        assert [e.ctx.id for e in held.ahead] == [timed]
        wait_until(lambda: app.get_job(timed).status in ("done", "failed"), 20, "the timed job")
    job = app.get_job(timed)
    assert (job.status, job.attempt, job.failures) == ("done", 1, 0), job.error_history


@pytest.mark.slow
def test_a_drain_runs_what_the_children_hold_that_starts_in_time(
    make_app: MakeApp, tmp_path: Path
) -> None:
    # Like the jobs the thread pool claimed ahead: claimed before the signal, they are run,
    # not handed back (a job stuck behind a slow handler is released by PATIENCE instead).
    app = make_app()
    register(app)
    log = str(tmp_path / "starts.log")
    slow = app.runtime.registry.tasks["pool.nap"].enqueue(1.0, log)
    waiting = [app.runtime.registry.tasks["pool.nap"].enqueue(0.0, log) for _ in range(2)]
    with running(app, concurrency=1, pool="process", app_spec=SPEC) as worker:
        wait_until(lambda: [s for s in starts(log) if s[0] == slow], 20, "the slow job to start")
        held = worker.pool.fleet.children[0]
        wait_until(lambda: held.entry is not None, 5, "the worker to learn of the start")
        assert [e.ctx.id for e in held.ahead] == waiting
        worker.stop()  # the first SIGTERM: drain
        wait_until(lambda: all(app.get_job(j).status == "done" for j in [slow, *waiting]), 20,
                   "the drain")
        wait_until(lambda: not worker.registry.entries(), 10, "nothing left in flight")
    for job_id in [slow, *waiting]:
        job = app.get_job(job_id)
        assert (job.attempt, job.interruptions, job.stall_count) == (1, 0, 0)
    assert {(j, a) for j, a, _ in starts(log)} == {(slow, 1)} | {(w, 1) for w in waiting}
