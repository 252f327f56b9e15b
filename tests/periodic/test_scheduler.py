"""The scheduler duty against every store: one job per (schedule, tick) whoever schedules,
catch-up policies, where a schedule starts, and a real worker running a schedule."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest

import tether
from tests.servers import IN_PROCESS_KINDS
from tests.worker.helpers import running, wait_until
from tether._config import make_settings
from tether._context import current_job
from tether._errors import StoreUnavailable
from tether._events import Event, Events
from tether._maintenance.maintainer import SCHEDULE_ELECTION, Maintainer
from tether._maintenance.scheduler import MAX_CATCH_UP, ON_TIME, Scheduler
from tether._periodic import CatchUp, Schedule, tick_of
from tether.stores import NewJob, Outcome, Store

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(params=IN_PROCESS_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    """Every store, the in-process memory store too (nothing here leaves the process)."""
    kind: str = request.param
    return kind


@pytest.fixture
def app(store_url: str) -> Iterator[tether.App]:
    made = tether.App(store_url, lease_ttl=3, poll_interval=0.1)
    yield made
    made.close()


def every(app: tether.App, seconds: float, catch_up: CatchUp = "latest",
          name: str = "beat") -> Schedule:
    @app.task(name=f"task.{name}", queue=f"q.{name}")
    def beat() -> None: ...

    app.periodic(every=seconds, catch_up=catch_up, name=name)(beat)
    return next(s for s in app.runtime.registry.schedules() if s.name == name)


def ticks_enqueued(store: Store, queue: str) -> list[float]:
    found = [tick_of(j.payload) for j in store.list_jobs(queue=queue, limit=1000)]
    assert None not in found
    return sorted(t for t in found if t is not None)


def scheduler(store: Store, app: tether.App, events: Events | None = None) -> Scheduler:
    return Scheduler(store, app.runtime.registry.schedules(), events or Events(), "test-holder")


def test_a_new_schedule_starts_at_its_next_tick(app: tether.App) -> None:
    every(app, 10)
    store = app.store
    t0 = 1_800_000_003.0
    wait = scheduler(store, app).run_once(now=t0)
    assert wait == pytest.approx(7.0)  # the next multiple of 10
    [state] = store.schedules()
    assert (state.name, state.last_tick, state.last_job_id) == ("beat", t0, None)
    assert ticks_enqueued(store, "q.beat") == []
    assert scheduler(store, app).run_once(now=t0 + 6.9) == pytest.approx(0.1)
    assert ticks_enqueued(store, "q.beat") == []
    assert scheduler(store, app).run_once(now=t0 + 7) == pytest.approx(10.0)
    assert ticks_enqueued(store, "q.beat") == [1_800_000_010.0]


def test_every_tick_once_whoever_schedules_and_however_often(app: tether.App,
                                                            open_another: Any) -> None:
    every(app, 1)
    stores = [app.store, open_another(), open_another()]
    t0 = 1_800_000_000.0
    scheduler(stores[0], app).run_once(now=t0)
    for i in range(1, 21):
        # Three leaders (a live one, a paused one waking late, a replay) each offer the ticks.
        for s in stores:
            scheduler(s, app).run_once(now=t0 + i)
        scheduler(stores[1], app).run_once(now=t0 + i - 0.5)
    assert ticks_enqueued(app.store, "q.beat") == [t0 + i for i in range(1, 21)]


def test_a_tick_whose_job_ran_and_was_pruned_is_not_enqueued_again(app: tether.App) -> None:
    """The dedup record is the schedule's row, which pruning never touches: once the job of a
    tick has run and been pruned (its unique key free again), a paused leader waking with that
    old tick still enqueues nothing."""
    schedule = every(app, 1)
    store = app.store
    t0 = 1_800_000_000.0
    scheduler(store, app).run_once(now=t0)
    scheduler(store, app).run_once(now=t0 + 1)
    [job] = store.claim("w", ["q.beat"], 1, 30.0, now=t0 + 1)
    assert job.lease is not None
    assert store.finish([Outcome(job.lease, "done", result="null")], now=t0 + 2) == []
    assert store.prune("done", 0.0, now=t0 + 3) == 1
    assert store.get_job(job.id) is None
    scheduler(store, app).run_once(now=t0 + 1.5)  # a leader paused since t0 + 1.5 wakes
    assert store.schedule_tick("beat", t0 + 1, schedule.new_job(t0 + 1), now=t0 + 3) is None
    assert ticks_enqueued(store, "q.beat") == []
    scheduler(store, app).run_once(now=t0 + 3)
    assert ticks_enqueued(store, "q.beat") == [t0 + 3]


def test_concurrent_leaders_enqueue_each_tick_once(app: tether.App, open_another: Any) -> None:
    every(app, 1)
    stores = [open_another() for _ in range(3)]
    t0 = 1_800_000_000.0
    scheduler(app.store, app).run_once(now=t0)
    errors: list[BaseException] = []

    def lead(s: Store) -> None:
        try:
            for i in range(1, 16):
                scheduler(s, app).run_once(now=t0 + i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=lead, args=(s,)) for s in stores]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert errors == []
    assert ticks_enqueued(app.store, "q.beat") == [t0 + i for i in range(1, 16)]


def test_catch_up_latest_enqueues_only_the_most_recent_missed_tick(app: tether.App) -> None:
    every(app, 1)
    events = Events()
    skipped: list[Event] = []
    enqueued: list[Event] = []
    events.on("schedule_skipped", skipped.append)
    events.on("schedule_enqueued", enqueued.append)
    t0 = 1_800_000_000.0
    s = scheduler(app.store, app, events)
    s.run_once(now=t0)
    s.run_once(now=t0 + 1)
    s.run_once(now=t0 + 11.5)  # no leader for ten ticks
    assert ticks_enqueued(app.store, "q.beat") == [t0 + 1, t0 + 11]
    assert [e.detail["missed"] for e in skipped if e.detail["why"] != "start"] == [9]
    assert [e.detail["tick"] for e in enqueued] == [t0 + 1, t0 + 11]
    assert all(e.job_id for e in enqueued)


def test_catch_up_all_enqueues_every_missed_tick_up_to_the_bound(app: tether.App) -> None:
    every(app, 1, "all")
    t0 = 1_800_000_000.0
    s = scheduler(app.store, app)
    s.run_once(now=t0)
    s.run_once(now=t0 + 5)
    assert ticks_enqueued(app.store, "q.beat") == [t0 + i for i in range(1, 6)]
    s.run_once(now=t0 + 5 + MAX_CATCH_UP + 50)
    got = ticks_enqueued(app.store, "q.beat")
    assert len(got) == 5 + MAX_CATCH_UP
    assert got[5:] == [t0 + 55 + i for i in range(1, MAX_CATCH_UP + 1)]


def test_catch_up_none_skips_missed_ticks_and_runs_the_next_due_one(app: tether.App) -> None:
    every(app, 10, "none")
    t0 = 1_800_000_000.0
    s = scheduler(app.store, app)
    s.run_once(now=t0)
    s.run_once(now=t0 + 10 + ON_TIME / 2)  # a little late: still due now
    assert ticks_enqueued(app.store, "q.beat") == [t0 + 10]
    s.run_once(now=t0 + 40 + ON_TIME + 1)  # 20, 30, 40 missed
    assert ticks_enqueued(app.store, "q.beat") == [t0 + 10]
    [state] = app.store.schedules()
    assert state.last_tick == t0 + 40  # recorded as skipped: never enqueued later
    s.run_once(now=t0 + 50)
    assert ticks_enqueued(app.store, "q.beat") == [t0 + 10, t0 + 50]


@pytest.mark.parametrize("catch_up", ["all", "latest"])
def test_a_schedule_changed_by_a_deploy_starts_afresh_instead_of_catching_up(
        app: tether.App, store_url: str, catch_up: CatchUp) -> None:
    """every=60 becomes every=1 under the same name: the new spec's ticks since the last job
    were never due. Caught up, they were a burst of 100 jobs (all) or an unplanned run
    (latest); the schedule now starts at its next tick, like a new one."""
    every(app, 60, catch_up)
    t0 = 1_800_000_000.0  # a multiple of 60
    scheduler(app.store, app).run_once(now=t0)
    scheduler(app.store, app).run_once(now=t0 + 60)
    assert ticks_enqueued(app.store, "q.beat") == [t0 + 60]
    deployed = tether.App(store_url, lease_ttl=3, poll_interval=0.1)
    try:
        every(deployed, 1, catch_up)
        events = Events()
        skipped: list[Event] = []
        events.on("schedule_skipped", skipped.append)
        later = scheduler(deployed.store, deployed, events)
        later.run_once(now=t0 + 500.5)
        assert ticks_enqueued(app.store, "q.beat") == [t0 + 60]
        assert [(e.detail["why"], e.detail["tick"]) for e in skipped] == [
            ("spec changed", t0 + 500.5)]
        later.run_once(now=t0 + 501)
        assert ticks_enqueued(app.store, "q.beat") == [t0 + 60, t0 + 501]
        # Unchanged since (its jobs carry the new spec): a gap is caught up as usual.
        later.run_once(now=t0 + 505)
        assert ticks_enqueued(app.store, "q.beat")[2:] == (
            [t0 + 502, t0 + 503, t0 + 504, t0 + 505] if catch_up == "all" else [t0 + 505])
    finally:
        deployed.close()


@pytest.mark.parametrize("catch_up", ["all", "latest"])
def test_a_changed_schedule_whose_last_job_was_pruned_does_not_catch_up_from_scratch(
        app: tether.App, store_url: str, catch_up: CatchUp) -> None:
    """The spec a schedule last ticked under lives in its own record, which pruning never
    touches. It was read from the last job, so once the pruner removed that job a deploy that
    changed the spec caught up from scratch: a 7-day schedule changed to hourly with
    catch_up="all" enqueued 72 jobs at once."""
    week, hour = 7 * 86_400, 3_600
    every(app, week, catch_up)
    t0 = 1_800_489_600.0  # a multiple of a week (epoch Thursdays)
    scheduler(app.store, app).run_once(now=t0 - 10)
    scheduler(app.store, app).run_once(now=t0)
    [fired] = app.store.claim("w", ["q.beat"], 1, 30.0, now=t0 + 1)
    assert fired.lease is not None
    assert app.store.finish([Outcome(fired.lease, "done", result="null")], now=t0 + 2) == []
    assert app.store.prune("done", 0.0, now=t0 + 3) == 1
    assert app.store.get_job(fired.id) is None, "the pruner removed the last job"
    deployed = tether.App(store_url, lease_ttl=3, poll_interval=0.1)
    try:
        every(deployed, hour, catch_up)
        events = Events()
        skipped: list[Event] = []
        events.on("schedule_skipped", skipped.append)
        later = scheduler(deployed.store, deployed, events)
        later.run_once(now=t0 + 72 * hour + 30)  # three days later, the deploy's first tick
        assert ticks_enqueued(app.store, "q.beat") == [], "no catch-up from scratch"
        assert [e.detail["why"] for e in skipped] == ["spec changed"]
        later.run_once(now=t0 + 73 * hour)
        assert ticks_enqueued(app.store, "q.beat") == [t0 + 73 * hour], "then on the new spec"
        [state] = app.store.schedules()
        assert state.spec == next(s for s in deployed.runtime.registry.schedules()).fingerprint
    finally:
        deployed.close()


def test_a_store_error_does_not_end_the_duty(app: tether.App) -> None:
    every(app, 1)

    class Flaky:
        def __init__(self, store: Store) -> None:
            self.store, self.fail = store, 2

        def __getattr__(self, name: str) -> Any:
            return getattr(self.store, name)

        def schedules(self) -> Any:
            if self.fail:
                self.fail -= 1
                raise StoreUnavailable("down")
            return self.store.schedules()

    flaky = Flaky(app.store)
    settings = make_settings(election=False, reaper_interval=0, prune_interval=0)
    m = Maintainer(flaky, "h", settings, Events(), reap=False,  # type: ignore[arg-type]
                   schedules=app.runtime.registry.schedules())
    [duty] = m.duties
    assert (duty.name, duty.election) == ("schedule", SCHEDULE_ELECTION)
    assert m._perform(duty) == 1.0 and duty.failures == 1
    assert m._perform(duty) == 1.0 and duty.failures == 2
    assert 0 <= m._perform(duty) <= 1.0 and duty.failures == 0
    assert [s.name for s in app.store.schedules()] == ["beat"]


def test_a_schedule_whose_job_the_store_refuses_does_not_stop_the_others(
        app: tether.App) -> None:
    bad = replace(every(app, 1, name="a"), template=NewJob("task.a", priority=2**40))
    good = every(app, 1, name="b")
    s = Scheduler(app.store, [bad, good], Events(), "test-holder")
    t0 = 1_800_000_000.0
    s.run_once(now=t0)
    with pytest.raises(ValueError, match="priority"):
        s.run_once(now=t0 + 1)  # reported to the maintainer, which logs it and retries
    assert ticks_enqueued(app.store, "q.b") == [t0 + 1]
    assert ticks_enqueued(app.store, "q.a") == []


def test_a_worker_runs_a_schedule_and_handlers_see_the_tick(
        app: tether.App) -> None:
    seen: list[datetime | None] = []

    @app.periodic(every=0.2)
    @app.task(queue="fast")
    def fast() -> None:
        seen.append(current_job().scheduled_at)

    with running(app, queues=["fast"], concurrency=2) as worker:
        assert worker.maintainer is not None
        wait_until(lambda: len(seen) >= 4, timeout=30, what="4 scheduled runs")
    ticks = sorted(t.timestamp() for t in seen if t is not None)
    assert len(ticks) == len(seen) and len(set(ticks)) == len(ticks)
    for t in ticks:
        assert round(t / 0.2) * 0.2 == pytest.approx(t)
    state = {s.name: s for s in app.store.schedules()}[fast.name]
    assert state.last_job_id is not None


@pytest.mark.slow
def test_a_periodic_job_runs_with_its_tasks_options(app: tether.App) -> None:
    """Queue, priority, max_attempts and timeout of the task apply to its scheduled jobs: a
    tick's job that outlives its 0.3 s timeout fails for good after its single attempt."""
    release = threading.Event()

    @app.periodic(every=0.5)
    @app.task(queue="opts", priority=7, max_attempts=1, timeout=0.3)
    def slow() -> None:
        release.wait(30)

    try:
        with running(app, queues=["opts"], concurrency=2):
            job = wait_until(lambda: next((j for j in app.store.list_jobs(queue="opts")
                                           if j.status == "failed"), None),
                             timeout=30, what="a scheduled job to time out")
    finally:
        release.set()
    assert tick_of(job.payload) is not None
    assert (job.task, job.queue, job.priority, job.max_attempts, job.attempt) == (
        slow.name, "opts", 7, 1, 1)
    assert job.failure_reason == "timeout", (job.failure_reason, job.last_error)
