"""``tether.testing.drain``: the real worker, in-process, until no job is due."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import tether
from tests.servers import IN_PROCESS_KINDS, isolated_url
from tests.testing.apps import Recorder, make_app
from tether._errors import ConfigError
from tether.testing import DrainFailed, drain

Made = tuple[tether.App, dict[str, tether.Task], Recorder]


@pytest.fixture(params=IN_PROCESS_KINDS)
def made(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Made]:
    with isolated_url(request.param, tmp_path) as url:
        app, tasks, seen = make_app(url)
        try:
            yield app, tasks, seen
        finally:
            app.close()


@pytest.fixture
def on_memory(tmp_path: Path) -> Iterator[Made]:
    with isolated_url("memory", tmp_path) as url:
        app, tasks, seen = make_app(url)
        yield app, tasks, seen
        app.close()


@pytest.mark.slow
def test_drain_runs_jobs_and_the_jobs_they_enqueue(made: Made) -> None:
    app, tasks, seen = made
    first = tasks["add"].enqueue(1, 2)
    fan = tasks["fan"].enqueue(3)
    jobs = drain(app)
    assert [j.task for j in jobs] == ["add", "fan", "add", "add", "add"], "claim order"
    assert jobs[0].id == first and jobs[1].id == fan
    assert all(j.status == "done" and j.attempt == 1 for j in jobs)
    assert [j.result_value for j in jobs] == [3, 3, 1, 2, 3]
    # the real claim path: each job was leased by a worker with a per-claim token
    assert all(app.store.get_job(j.id).lease_token and j.started_at is not None  # type: ignore[union-attr]
               for j in jobs)
    assert [what for what, _ in seen.calls] == ["add", "fan", "add", "add", "add"]
    assert drain(app) == [], "nothing due: returns at once"
    assert app.store.list_workers() == [], "the worker unregistered"


def test_drain_of_an_empty_store_returns_at_once(made: Made) -> None:
    app, _, _ = made
    started = time.monotonic()
    assert drain(app) == []
    assert time.monotonic() - started < 5


def test_retries_in_back_off_are_fast_forwarded_on_memory(on_memory: Made) -> None:
    app, tasks, seen = on_memory
    job_id = tasks["flaky"].enqueue(3)  # Backoff(base=600): ten minutes, then twenty
    started = time.monotonic()
    [job] = drain(app)
    assert time.monotonic() - started < 10, "the clock jumped; nobody slept"
    assert (job.id, job.status, job.attempt, job.result_value) == (job_id, "done", 3, "ok")
    assert [r["attempt"] for r in job.errors] == [1, 2]
    assert seen.calls == [("flaky", 1), ("flaky", 2), ("flaky", 3)]


def test_without_fast_forward_a_retry_in_back_off_is_left_pending(made: Made) -> None:
    app, tasks, _ = made
    job_id = tasks["flaky"].enqueue(3)
    [job] = drain(app, fast_forward=False)
    assert (job.id, job.status, job.attempt) == (job_id, "pending", 1)
    assert "not yet" in (job.last_error or "")
    again = tasks["flaky"].enqueue(3)
    with pytest.raises(DrainFailed, match="not yet") as info:
        drain(app, fast_forward=False, raise_on_failure=True)
    assert [j.id for j in info.value.jobs] == [again], "a retry waiting after an error counts"



def test_a_due_retry_runs_in_the_same_drain_and_failures_raise_when_asked(made: Made) -> None:
    app, tasks, seen = made
    job_id = tasks["boom"].enqueue()  # max_attempts=2, no back-off
    with pytest.raises(DrainFailed, match="it went boom") as info:
        drain(app, raise_on_failure=True)
    [job] = info.value.jobs
    assert (job.id, job.status, job.attempt, job.failure_reason) == (job_id, "failed", 2,
                                                                      "error")
    assert seen.calls == [("boom", 1), ("boom", 2)]
    tasks["boom"].enqueue()
    [again] = drain(app)
    assert again.status == "failed", "without raise_on_failure the failed job is returned"


def test_max_jobs_stops_after_that_many_claims(made: Made) -> None:
    app, tasks, _ = made
    ids = [tasks["add"].enqueue(i, 0) for i in range(5)]
    jobs = drain(app, max_jobs=2)
    assert [j.id for j in jobs] == ids[:2]
    assert [app.get_job(i).status for i in ids] == ["done"] * 2 + ["pending"] * 3
    assert [j.id for j in drain(app)] == ids[2:]


def test_max_jobs_claims_nothing_ahead(made: Made) -> None:
    """A claim ahead of free slots would take jobs past ``max_jobs``, and the drain that ends
    the burst would run them: with max_jobs the worker is built not to claim ahead."""
    app, tasks, _ = made
    ids = [tasks["add"].enqueue(i, 0) for i in range(60)]
    jobs = drain(app, max_jobs=20, concurrency=2)
    assert len(jobs) <= 21, "at most one job per free slot past the count (concurrency 2)"
    statuses = [app.get_job(i).status for i in ids]
    assert statuses.count("done") == len(jobs)
    assert statuses.count("pending") == len(ids) - len(jobs)
    assert statuses.count("running") == 0


def test_a_burst_counting_claims_refuses_a_worker_that_claims_ahead(made: Made) -> None:
    from tether._worker.burst import run_burst

    app, _, _ = made
    with pytest.raises(ValueError, match="claim_ahead=False"):
        run_burst(app.worker(concurrency=1, maintenance=False), install_signals=False,
                  max_jobs=1)


@pytest.mark.slow
def test_a_burst_refuses_a_worker_that_schedules_periodic_ticks(made: Made) -> None:
    """A tick the burst's own scheduler enqueued could keep it from ever being idle: a burst
    takes only a worker built with ``schedules=False`` (which campaigns for no schedule)."""
    from tether._worker.burst import run_burst

    app, _, _ = made

    @app.periodic(every=1)
    @app.task(name="p.every")
    def every() -> None:
        return None

    with pytest.raises(ValueError, match="schedules=False"):
        run_burst(app.worker(concurrency=1), install_signals=False)
    quiet = app.worker(concurrency=1, schedules=False)
    assert quiet.maintainer is not None and quiet.maintainer.scheduler is None
    assert run_burst(quiet, install_signals=False).exit_code == 0
    assert app.store.schedules() == [], "no tick was recorded"


def test_queues_limit_what_is_drained(made: Made) -> None:
    app, tasks, _ = made
    other = tasks["other"].enqueue()
    mine = tasks["add"].enqueue(1, 1)
    assert [j.id for j in drain(app, queues=["default"])] == [mine]
    assert app.get_job(other).status == "pending"
    assert [j.id for j in drain(app)] == [other], "by default every queue of the app's tasks"


def test_concurrency_runs_jobs_side_by_side(made: Made) -> None:
    """Four jobs that each wait until all four are running: they finish only if the drain
    runs them side by side (one at a time, the first fails on its broken barrier)."""
    app, tasks, _ = made
    for _ in range(4):
        tasks["meet"].enqueue(4)
    jobs = drain(app, concurrency=4)
    assert len(jobs) == 4
    assert [(j.status, j.last_error) for j in jobs] == [("done", None)] * 4, "four at once"


def test_a_timeout_stops_the_worker_and_raises(made: Made) -> None:
    app, tasks, _ = made
    job_id = tasks["slow"].enqueue(30)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=str(job_id)):
        drain(app, timeout=0.5)
    assert time.monotonic() - started < 10
    job = app.get_job(job_id)
    assert job.status == "pending" and job.interruptions == 1, "its lease was handed back"


def test_drain_works_on_a_private_memory_store() -> None:
    """``App("memory://")`` and ``drain(app)``, the natural set-up, just work: the app's
    unnamed memory store is private to the app (its worker's connections included), no
    longer to each store object (drain raised "drain needs a named memory store")."""
    app, tasks, _ = make_app("memory://")
    other, other_tasks, _ = make_app("memory://")
    try:
        job_id = tasks["add"].enqueue(1, 2)
        other_id = other_tasks["add"].enqueue(5, 5)
        [ran] = drain(app)
        assert (ran.id, ran.status, ran.result) == (job_id, "done", 3)
        assert app.url == "memory://", "the URL the user gave is kept"
        assert other.get_job(other_id).status == "pending", "another app's store is apart"
        assert [j.result for j in drain(other)] == [10]
    finally:
        app.close()
        other.close()


def test_fast_forward_needs_a_memory_store(tmp_path: Path) -> None:
    app, _, _ = make_app(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        with pytest.raises(ConfigError, match="fast_forward"):
            drain(app, fast_forward=True)
    finally:
        app.close()


def test_wait_and_the_async_api_work_on_the_memory_store(on_memory: Made) -> None:
    """app.wait is woken by the memory store's finish (no poll), and aenqueue goes through its
    async producer, while drain runs the worker in another thread."""
    import asyncio
    import threading

    app, tasks, _ = on_memory

    async def produce() -> list[int]:
        return [await tasks["add"].aenqueue(2, 3), await tasks["boom"].aenqueue()]

    ok, bad = asyncio.run(produce())
    worker = threading.Thread(target=drain, args=(app,), daemon=True)
    worker.start()
    assert app.wait(ok, timeout=20) == 5
    with pytest.raises(tether.JobFailed, match="it went boom"):
        app.wait(bad, timeout=20)
    worker.join(20)
    assert not worker.is_alive()


def test_async_tasks_are_drained_like_sync_ones(made: Made) -> None:
    """``async def`` handlers run on the worker's event loop thread; a failing one is
    reported as failed, not hung on."""
    import asyncio

    app, _, _ = made

    @app.task(name="a.double")
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    @app.task(name="a.broken", max_attempts=1)
    async def broken() -> None:
        await asyncio.sleep(0)
        raise KeyError("async boom")

    ok = double.enqueue(21)
    bad = broken.enqueue()
    with pytest.raises(DrainFailed, match="async boom") as info:
        drain(app, raise_on_failure=True)
    assert [j.id for j in info.value.jobs] == [bad]
    assert app.get_job(ok).result_value == 42
    assert app.get_job(bad).status == "failed"


def test_a_periodic_task_does_not_keep_drain_going(made: Made) -> None:
    """drain runs no scheduler (maintenance is off): a schedule every second neither loops
    drain forever nor enqueues anything; its task, enqueued by hand, runs once."""
    app, _, _ = made

    @app.periodic(every=1)
    @app.task(name="p.tick")
    def tick() -> str:
        return "ticked"

    started = time.monotonic()
    assert drain(app) == []
    job_id = tick.enqueue()
    [job] = drain(app)
    assert (job.id, job.status, job.result) == (job_id, "done", "ticked")
    assert time.monotonic() - started < 20
    assert app.store.schedules() == [], "no tick was recorded by drain"


@pytest.mark.slow
def test_a_job_that_always_reschedules_itself_ends_in_a_timeout(on_memory: Made) -> None:
    """fast_forward follows delayed jobs; an endless chain of them is a TimeoutError after
    ``timeout``, naming the job left, never a drain that hangs."""
    app, _, _ = on_memory

    @app.task(name="again")
    def again() -> None:
        again.enqueue_with((), delay=60)

    again.enqueue()
    with pytest.raises(TimeoutError, match="did not finish within 1"):
        drain(app, timeout=1.0)


def test_a_drain_logs_no_warning_when_it_ends(made: Made,
                                              caplog: pytest.LogCaptureFixture) -> None:
    """The end of a drain is the program's own stop, not an operator's signal: a WARNING
    telling the user to "send the signal again (Ctrl-C)" at the end of each test was noise."""
    app, tasks, _ = made
    tasks["add"].enqueue(1, 2)
    with caplog.at_level("INFO", logger="tether"):
        assert [j.status for j in drain(app)] == ["done"]
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == []
    assert any("no job is due" in r.getMessage() for r in caplog.records), "the stop is logged"
