"""``tether schedules MODULE:APP``: every schedule with its task, spec, zone, catch-up, next
run and last run (tick, job id, that job's status), as a table and as JSON."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tests.servers import IN_PROCESS_KINDS
from tether._appspec import load_app
from tether._cli.main import main
from tether._events import Events
from tether._maintenance.scheduler import Scheduler

_n = itertools.count()


@pytest.fixture(params=IN_PROCESS_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    """Every store, the in-process memory store too (nothing here leaves the process)."""
    kind: str = request.param
    return kind


APP = '''
import tether

app = tether.App()

@app.periodic(every=60)
@app.task(name="sched.beat", queue="beats")
def beat() -> None: ...

@app.periodic(cron="30 9 * * mon-fri", tz="Europe/Paris", catch_up="none", name="sched.morning",
              kwargs={"kind": "daily"})
@app.task(name="sched.report")
def report(kind: str) -> None: ...
'''


@pytest.fixture
def spec(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    module = f"sched_app_{next(_n)}"
    (tmp_path / f"{module}.py").write_text(APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TETHER_URL", store_url)
    return f"{module}:app"


def test_lists_declared_schedules_before_any_run(spec: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    load_app(spec).store  # noqa: B018 - creates the schema, as a producer would
    assert main(["schedules", spec, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["task"], r["spec"], r["tz"], r["catch_up"]) for r in rows] == [
        ("sched.beat", "sched.beat", "every 60s", "UTC", "latest"),
        ("sched.morning", "sched.report", "30 9 * * mon-fri", "Europe/Paris", "none")]
    assert all(r["next_run"] and r["last_tick"] is None and r["last_job_id"] is None
               for r in rows)


def test_shows_the_last_run_and_its_job_status(spec: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    app = load_app(spec)
    store = app.store
    t0 = (store.now() // 60) * 60 - 600
    scheduler = Scheduler(store, app.runtime.registry.schedules(), Events(), "test")
    scheduler.run_once(now=t0)
    scheduler.run_once(now=t0 + 60)  # sched.beat's tick t0 + 60 is enqueued
    assert main(["schedules", spec, "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    beat = rows["sched.beat"]
    assert beat["last_job_id"] is not None and beat["last_job_status"] == "pending"
    assert beat["last_tick"] == beat["last_job_tick"]
    assert beat["overdue_since"] is not None  # ten minutes ago, and no leader since
    assert rows["sched.morning"]["last_job_id"] is None  # only its start is recorded
    [job] = store.claim("w", ["beats"], 1, 30.0)
    assert main(["schedules", spec]) == 0
    out = capsys.readouterr().out
    assert "SCHEDULE" in out and "NEXT RUN" in out and "JOB STATUS" in out
    assert "sched.beat" in out and "every 60s" in out and "running" in out
    assert "Europe/Paris" in out and f" {job.id} " in out and "overdue since" in out


def test_a_schedule_the_app_no_longer_declares_is_listed(
        spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = load_app(spec).store
    store.schedule_tick("sched.gone", store.now(), None)
    assert main(["schedules", spec]) == 0
    assert "(not declared)" in capsys.readouterr().out


def test_without_an_app_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TETHER_APP", raising=False)
    assert main(["schedules"]) == 2
    assert "tether schedules MODULE:APP" in capsys.readouterr().err
