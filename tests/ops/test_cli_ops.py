"""The CLI, complete and correct: --app, new commands, live views, health, JSON shape."""

from __future__ import annotations

import argparse
import json
import textwrap
import uuid
from pathlib import Path

import pytest

import tether
from tests.ops.conftest import run_cli
from tether._cli.main import build_parser, main
from tether._task import make_new_job
from tether.stores import Outcome, WorkerInfo, open_store


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def app_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A module defining an app on its own SQLite file: (MODULE:APP, its store URL)."""
    name = "opsapp_" + uuid.uuid4().hex[:8]
    url = f"sqlite:///{tmp_path / 'app.db'}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(f"""
        import tether
        app = tether.App({url!r}, lease_ttl=4)

        @app.task(name="ops.mail", queue="mail", max_attempts=7, priority=3)
        def mail(to): return to
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("TETHER_URL", raising=False)
    monkeypatch.delenv("TETHER_APP", raising=False)
    monkeypatch.chdir(tmp_path / "..")
    return f"{name}:app", url


def test_app_gives_the_store_and_the_task_options(
    app_spec: tuple[str, str], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec, url = app_spec
    code, out, err = run(capsys, "enqueue", "--app", spec, "ops.mail", "--args", '["a@b"]')
    assert code == 0, err
    job = tether.App(url).get_job(int(out))
    assert (job.queue, job.max_attempts, job.priority) == ("mail", 7, 3)
    code, out, _ = run(capsys, "jobs", "--json", "--app", spec)  # --app after the command
    assert [j["id"] for j in json.loads(out)] == [job.id]
    monkeypatch.setenv("TETHER_APP", spec)
    code, out, _ = run(capsys, "job", str(job.id), "--json")
    assert json.loads(out)["queue"] == "mail"
    code, out, err = run(capsys, "enqueue", "ops.mail", "--queue", "other")  # no argument
    assert code == 2 and out == "" and "ops.mail(" in err and "missing a required" in err
    code, out, _ = run(capsys, "enqueue", "ops.mail", "--args", '["a@b"]', "--queue", "other",
                       "--max-attempts", "2")
    job2 = tether.App(url).get_job(int(out))
    assert (job2.queue, job2.max_attempts) == ("other", 2)
    code, _, err = run(capsys, "enqueue", "nope.task")
    assert code == 2 and "no task named 'nope.task'" in err


def test_job_detail_is_readable(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = open_store(store_url)
    store.migrate()
    try:
        (job_id,) = store.enqueue([make_new_job("t", [{"k": [1, 2]}], {"x": None},
                                                max_attempts=1)])
        (job,) = store.claim("w", ["default"], 1, 30)
        store.finish([Outcome(job.lease, "error", reason="error",
                              error="ValueError: bad\nTraceback (most recent call last):\n  x")])
    finally:
        store.close()
    code, out, _ = run(capsys, "job", str(job_id), "--url", store_url)
    assert code == 0
    assert 'args              [{"k": [1, 2]}]' in out and '{"x": null}' in out
    assert "UTC" in out and "attempt 1 error at" in out and "\n    Traceback" in out
    code, out, _ = run(capsys, "job", str(job_id), "--url", store_url, "--json")
    data = json.loads(out)
    assert data["errors"][0]["at"].endswith("+00:00") and data["status"] == "failed"
    code, out, _ = run(capsys, "job", str(job_id), "--url", store_url, "--follow")
    assert code == 1 and "failed" in out  # follow of a finished job: its state, exit 1


def test_cancel_purge_pause_resume_and_stats(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(store_url)
    store.migrate()
    try:
        ids = store.enqueue([make_new_job("t", [], {}, queue="q") for _ in range(3)])
        now = store.now()
        store.register_worker(WorkerInfo("dead-one", "h", 1, ("q",), 1), now=now - 100)
        store.register_worker(WorkerInfo("live-one", "h", 2, ("q",), 1), now=now)
    finally:
        store.close()
    assert run(capsys, "cancel", str(ids[0]), "--url", store_url)[1].strip() == \
        f"job {ids[0]} cancelled"
    assert run(capsys, "cancel", "99999", "--url", store_url)[0] == 4
    code, out, _ = run(capsys, "pause", "q", "--url", store_url, "--json")
    assert json.loads(out) == {"queue": "q", "state": "paused", "changed": True}
    code, out, _ = run(capsys, "stats", "--url", store_url, "--json")
    stats = json.loads(out)
    assert stats["queues"]["q"]["paused"] is True and stats["queues"]["q"]["pending"] == 2
    states = {w["id"]: w["state"] for w in stats["workers"]}
    assert states == {"dead-one": "dead", "live-one": "live"}
    code, out, _ = run(capsys, "stats", "--url", store_url)
    assert "1 live, 1 dead" in out and "paused" in out
    assert run(capsys, "resume", "q", "--url", store_url)[1].startswith("queue q active")
    code, out, _ = run(capsys, "purge", "q", "--url", store_url, "--status", "pending",
                       "--status", "cancelled", "--yes")
    assert code == 0 and "deleted 3" in out
    code, out, _ = run(capsys, "stats", "--url", store_url, "--watch", "--count", "2",
                       "--interval", "0.1", "--json")
    assert code == 0 and len(out.strip().splitlines()) == 2


def test_health(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "migrate", "--url", store_url)
    assert run(capsys, "health", "--url", store_url)[0] == 0
    code, _, err = run(capsys, "health", "--url", store_url, "--worker", "--queue", "q")
    assert code == 1 and "no live worker serves queue(s) q" in err
    store = open_store(store_url)
    try:
        store.register_worker(WorkerInfo("w", "h", 2, ("q",), 1))
    finally:
        store.close()
    code, out, _ = run(capsys, "health", "--url", store_url, "--worker", "--queue", "q",
                       "--json")
    assert code == 0 and json.loads(out) == {"store": "ok", "queues": {"q": 1}, "healthy": True,
                                             "warnings": []}
    code, _, _ = run(capsys, "health", "--url", store_url, "--worker", "--queue", "q",
                     "--local")
    assert code == 1  # the worker row's host is "h", not this machine


def test_every_option_has_help_and_every_command_an_example() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        assert p.epilog and p.epilog.startswith("example: tether"), name
        for action in p._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, f"tether {name}: {action.dest} has no help"
        assert "(default:" in p.format_help() or name in ("cancel", "migrate"), name


def test_python_dash_m_tether() -> None:
    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"tether {tether.__version__}"


def handed_back_job(store_url: str) -> int:
    """A running job of max_attempts 3 on its 2nd attempt after 5 hand-backs (claim 7)."""
    store = open_store(store_url)
    store.migrate()
    try:
        (job_id,) = store.enqueue([make_new_job("t.back", [], {}, max_attempts=3)])
        for _ in range(5):  # released without running, as a crashed pool child's queue is
            (job,) = store.claim("w", ["default"], 1, 30)
            store.finish([Outcome(job.lease, "released")])
        (job,) = store.claim("w", ["default"], 1, 30)
        store.finish([Outcome(job.lease, "error", reason="error", error="E: x",
                              retry_delay=0.0)])
        (job,) = store.claim("w", ["default"], 1, 30)
        assert (job.attempt, job.interruptions, job.tries) == (7, 5, 2)
    finally:
        store.close()
    return job_id


def test_hand_backs_are_shown_apart_from_attempts(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 18 E: `tether jobs` printed ATTEMPT 7/2 for a job a crashing pool child had
    # handed back again and again; hand-backs are not attempts.
    job_id = handed_back_job(store_url)
    code, out, _ = run(capsys, "jobs", "--url", store_url)
    assert code == 0
    [row] = [line for line in out.splitlines() if line.startswith(str(job_id))]
    assert "2/3 (5 handed back)" in row and "7/3" not in row, row
    code, out, _ = run(capsys, "job", str(job_id), "--url", store_url)
    line = next(line for line in out.splitlines() if line.startswith("attempt "))
    assert line.split(None, 1)[1] == "2 of 3, 5 handed back (claim 7)", out
    code, out, _ = run(capsys, "job", str(job_id), "--url", store_url, "--json")
    data = json.loads(out)
    assert (data["attempt"], data["tries"], data["handed_back"]) == (7, 2, 5)
    job = tether.App(store_url).get_job(job_id)
    assert (job.attempt, job.tries, job.handed_back) == (7, 2, 5)
    assert "after 2 attempt(s) and 5 hand-back(s)" in str(tether.JobFailed(job))
