"""``@app.periodic``: declaration, validation (ConfigError naming the option), the job a tick
makes, and ``current_job().scheduled_at``."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from tether import App, ConfigError
from tether import _payload as payload
from tether._context import JobContext
from tether._periodic import Schedule, tick_of, unique_key
from tether.stores import JobRecord


@pytest.fixture
def app(tmp_path: Path) -> App:
    return App(f"sqlite:///{tmp_path / 'p.db'}")


def test_stacked_on_a_task_with_its_options(app: App) -> None:
    @app.periodic(every=30, args=(1,), kwargs={"b": 2})
    @app.task(queue="cron", priority=-3, max_attempts=2)
    def job(a: int, b: int) -> int:
        return a + b

    [s] = app.runtime.registry.schedules()
    assert (s.name, s.task, s.every, s.catch_up, s.spec, s.tz_name) == (
        job.name, job, 30.0, "latest", "every 30s", "UTC")
    new = s.new_job(1_800_000_000.0)
    assert (new.task, new.queue, new.priority, new.max_attempts) == (job.name, "cron", -3, 2)
    assert new.unique_key == unique_key(job.name, 1_800_000_000.0)
    assert payload.decode_call(new.payload) == ([1], {"b": 2})
    assert tick_of(new.payload) == 1_800_000_000.0
    assert job(1, 2) == 3  # still the task


def test_applied_to_a_task_object_and_named_twice(app: App) -> None:
    @app.task
    def report(kind: str = "short") -> None: ...

    app.periodic(cron="0 9 * * mon", tz="Europe/Paris", name="weekly")(report)
    app.periodic(cron="@daily", kwargs={"kind": "long"}, catch_up="all", name="daily")(report)
    names = [(s.name, s.spec, s.tz_name, s.catch_up) for s in app.runtime.registry.schedules()]
    assert names == [("daily", "@daily", "UTC", "all"),
                     ("weekly", "0 9 * * mon", "Europe/Paris", "latest")]
    with pytest.raises(ConfigError, match="already declared"):
        app.periodic(every=5, name="daily")(report)


def test_every_ticks_are_multiples_of_the_interval(app: App) -> None:
    @app.periodic(every=0.25)
    @app.task
    def fast() -> None: ...

    [s] = app.runtime.registry.schedules()
    assert s.next_after(100.0) == 100.25 and s.next_after(100.1) == 100.25
    assert s.ticks_between(100.0, 101.0, 10) == [100.25, 100.5, 100.75, 101.0]
    assert s.ticks_between(100.0, 101.0, 1) == [101.0]
    assert s.ticks_between(0.0, 1e9, 2) == [1e9 - 0.25, 1e9]  # a long gap, not walked


@pytest.mark.parametrize(("options", "message"), [
    ({}, "exactly one of every= .* or cron="),
    ({"every": 5, "cron": "* * * * *"}, "exactly one"),
    ({"every": 0}, "every must be at least"),
    ({"every": -1}, "every must be at least"),
    ({"every": float("nan")}, "every must be a number"),
    ({"every": "5"}, "every must be a number"),
    ({"every": True}, "every must be a number"),
    ({"cron": "61 * * * *"}, "periodic cron: cron minute"),
    ({"cron": "* * *"}, "5 fields"),
    ({"cron": "* * * * *", "tz": "Mars/Olympus"}, "tz 'Mars/Olympus' is not a known"),
    ({"cron": "* * * * *", "tz": ""}, "tz must be a zone name"),
    ({"every": 5, "tz": "Europe/Paris"}, "tz applies to cron= only"),
    ({"every": 5, "catch_up": "some"}, "catch_up must be one of latest, all, none"),
    ({"every": 5, "args": {"a": 1}}, "args must be a tuple"),
    ({"every": 5, "kwargs": [("a", 1)]}, "kwargs must be a mapping"),
    ({"every": 5, "kwargs": "a"}, "kwargs must be a mapping"),
])
def test_bad_declarations_raise_config_error_naming_the_option(
    app: App, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        app.periodic(**options)  # type: ignore[arg-type]


def test_arguments_must_fit_the_task_and_it_must_be_a_task(app: App) -> None:
    @app.task
    def one(a: int) -> None: ...

    with pytest.raises(ConfigError, match="do not fit"):
        app.periodic(every=5)(one)
    with pytest.raises(ConfigError, match="above @app\\.task"):
        app.periodic(every=5)(lambda: None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="another App"):
        App("sqlite:///unused.db").periodic(every=5, args=(1,))(one)
    assert app.runtime.registry.schedules() == []


def test_fixed_arguments_are_encoded_once_at_declaration_by_the_tasks_codec(app: App) -> None:
    """A typed task takes what its ``enqueue`` takes (here a date, through the app's codec);
    what no tick could send is refused at import, naming the schedule."""
    @app.task
    def report(day: date, kind: str = "short") -> str:
        return f"{day} {kind}"

    fixed = [date(2026, 3, 29)]
    app.periodic(every=60, args=fixed, kwargs={"kind": "long"}, name="report")(report)
    fixed[0] = date(2000, 1, 1)  # the declaration encoded its arguments already
    [s] = app.runtime.registry.schedules()
    new = s.new_job(1_800_000_000.0)
    assert new.payload == s.new_job(1_800_000_060.0).payload.replace("1800000060.0",
                                                                     "1800000000.0")
    assert report.arguments(new.payload) == ([date(2026, 3, 29)], {"kind": "long"})
    with pytest.raises(ConfigError, match=r"periodic bad args/kwargs: .*JSON"):
        app.periodic(every=5, args=fixed, kwargs={"kind": object()}, name="bad")(report)
    with pytest.raises(ConfigError, match=r"periodic worse args/kwargs: .*decode"):
        app.periodic(every=5, args=("not a date",), name="worse")(report)
    assert [s.name for s in app.runtime.registry.schedules()] == ["report"]


def test_scheduled_at_is_the_tick_for_handlers(app: App) -> None:
    @app.periodic(every=60)
    @app.task
    def tick() -> None: ...

    [s] = app.runtime.registry.schedules()
    new = s.new_job(1_800_000_060.0)
    app.store.enqueue([new])
    [job] = app.store.claim("w", ["default"], 1, 30.0)  # a running job, as a handler sees it
    assert isinstance(job, JobRecord)
    ctx = JobContext(job, app.store)
    assert ctx.scheduled_at == datetime.fromtimestamp(1_800_000_060.0, UTC)
    app.store.enqueue([tick.new_job((), {})])
    [other] = app.store.claim("w", ["default"], 1, 30.0)
    assert JobContext(other, app.store).scheduled_at is None
    assert isinstance(s, Schedule)
