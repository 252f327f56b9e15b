"""Per-job log lines, the JSON format, the banner and the Ctrl-C message."""

from __future__ import annotations

import io
import json
import logging
import signal
import time
from pathlib import Path

import pytest

import tether
from tests.ops.conftest import Spawn
from tests.worker.helpers import running, wait_until
from tether import _logs as logs

FAST = tether.Backoff(base=0.05, factor=1.0, max=0.05, jitter=0.0)


@pytest.fixture
def app(tmp_path: Path) -> tether.App:
    a = tether.App(f"sqlite:///{tmp_path / 'logs.db'}", lease_ttl=1.5, poll_interval=0.05)

    @a.task(name="t.ok", queue="q1")
    def ok(x: int) -> int:
        return x

    @a.task(name="t.bad", queue="q1", max_attempts=2, retry=FAST)
    def bad() -> None:
        raise ValueError("boom here")

    @a.task(name="t.fail", queue="q1")
    def fail_now() -> None:
        raise tether.Fail("no point retrying")

    return a


def records(caplog: pytest.LogCaptureFixture, job_id: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "job_id", None) == job_id]


def test_each_failure_retry_and_dead_letter_is_one_line(
    app: tether.App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tether.jobs")
    ok_id = app.enqueue("t.ok", 7)
    bad_id = app.enqueue("t.bad")
    fail_id = app.enqueue("t.fail")
    with running(app, concurrency=2):
        wait_until(lambda: all(app.get_job(i).status in ("done", "failed")
                               for i in (ok_id, bad_id, fail_id)), what="jobs to end")
        wait_until(lambda: len([r for r in records(caplog, bad_id)
                                if r.levelno == logging.ERROR]) == 1, what="dead-letter line")
    ok = records(caplog, ok_id)
    assert [r.levelname for r in ok] == ["DEBUG", "DEBUG"]
    assert "started" in ok[0].getMessage() and "done" in ok[1].getMessage()
    assert ok[1].duration >= 0 and ok[1].task == "t.ok" and ok[1].queue == "q1"  # type: ignore[attr-defined]

    bad = records(caplog, bad_id)
    levels = [r.levelname for r in bad if r.levelno > logging.DEBUG]
    assert levels == ["WARNING", "INFO", "WARNING", "ERROR"], levels
    first_failure = next(r for r in bad if r.levelno == logging.WARNING)
    assert "ValueError: boom here" in first_failure.getMessage()
    assert "Traceback" in first_failure.traceback  # type: ignore[attr-defined]
    retry = next(r for r in bad if r.levelno == logging.INFO)
    assert "retry scheduled in 0.05s" in retry.getMessage() and retry.delay == 0.05  # type: ignore[attr-defined]
    dead = next(r for r in bad if r.levelno == logging.ERROR)
    assert "dead-lettered after attempt 2 (reason error)" in dead.getMessage()

    fail = [r for r in records(caplog, fail_id) if r.levelno > logging.DEBUG]
    assert [r.levelname for r in fail] == ["ERROR"]
    assert "no point retrying" in fail[0].getMessage()


def test_done_jobs_are_forgotten_quietly_and_a_later_listener_hears_them(
    app: tether.App, caplog: pytest.LogCaptureFixture
) -> None:
    # Below DEBUG a done job makes no line: the completer only lets the JobLog forget its
    # claim (Events.done_quietly). The claims must not pile up, and a listener that comes
    # while the worker runs must get the "completed" events from then on.
    caplog.set_level(logging.INFO, logger="tether.jobs")
    job_log = app.runtime.events._log
    heard: list[int] = []
    ok = app.runtime.registry.tasks["t.ok"]
    with running(app, concurrency=2):
        first = ok.enqueue_many([((i,), {}) for i in range(30)])
        wait_until(lambda: all(app.get_job(i).status == "done" for i in first),
                   what="the first jobs done")
        wait_until(lambda: not job_log._claims, what="their claims forgotten")
        app.runtime.events.on("completed", lambda e: heard.append(e.job_id or 0))
        later = ok.enqueue_many([((i,), {}) for i in range(10)])
        wait_until(lambda: sorted(heard) == sorted(later), what="the later jobs heard")
    assert not job_log._claims
    assert not [r for r in caplog.records if r.name == "tether.jobs"]


def test_json_lines_carry_the_job_fields(app: tether.App) -> None:
    out = io.StringIO()
    logs.configure("DEBUG", "json", stream=out)
    try:
        bad_id = app.enqueue("t.bad")
        with running(app, concurrency=1):
            wait_until(lambda: app.get_job(bad_id).status == "failed", what="dead letter")
            wait_until(lambda: "dead-lettered" in out.getvalue(), what="the line")
    finally:
        logging.basicConfig(force=True, handlers=[logging.NullHandler()])
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    mine = [d for d in lines if d.get("job_id") == bad_id]
    assert mine and all({"job_id", "attempt", "task", "queue", "worker", "time", "level",
                         "message"} <= d.keys() for d in mine)
    ends = [d for d in mine if d.get("outcome") in ("retrying", "failed")]
    assert ends and all(isinstance(d["duration"], float) for d in ends if "duration" in d)
    assert any("traceback" in d and "ValueError" in d["traceback"] for d in mine)
    assert mine[0]["time"].endswith("+00:00")


def test_banner_redacts_the_password() -> None:
    app = tether.App("postgresql://app:s3cret@127.0.0.1:5432/db")

    @app.task(name="a.b", queue="x")
    def f() -> None: ...

    runtime = app.runtime
    message, fields = logs.worker_banner(runtime.settings, runtime.url, runtime.registry.tasks,
                                         "host:1:abc", ["x"], 4, "threads")
    assert "s3cret" not in message and "app:***@127.0.0.1" in message
    assert tether.__version__ in message and "a.b" in message and "concurrency 4" in message
    assert fields["tasks"] == ["a.b"] and fields["pool"] == "threads"


def test_log_options_are_checked() -> None:
    with pytest.raises(tether.ConfigError):
        tether.App(log_format="xml")
    with pytest.raises(tether.ConfigError):
        logs.check_level("FOO")


def test_real_worker_banner_json_and_ctrl_c(tmp_path: Path, spawn: Spawn) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    proc = spawn("worker", "tests.ops.apps:app", "-c", "2", "--log-format", "json",
                 env={"TETHER_URL": url, "TETHER_TEST_SHUTDOWN_TIMEOUT": "7"})
    app = tether.App(url)
    try:
        job_id = app.enqueue("ops.boom", "from the test", queue="ops")
        wait_until(lambda: app.get_job(job_id).status == "failed", timeout=30,
                   what="the job to be dead-lettered")
    finally:
        app.close()
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in err.splitlines()]
    banner = lines[0]
    assert banner["version"] == tether.__version__ and banner["queues"] == ["mail", "ops"]
    assert "ops.boom" in banner["tasks"] and banner["concurrency"] == 2
    dead = [d for d in lines if d.get("job_id") == job_id and d["level"] == "ERROR"]
    assert len(dead) == 1 and dead[0]["reason"] == "error" and dead[0]["task"] == "ops.boom"
    stop = [d["message"] for d in lines if "SIGINT" in d["message"]]
    assert stop and "waiting up to 7s" in stop[0] and "again" in stop[0]


def test_a_process_pool_stall_is_logged_as_a_dead_child_with_its_pid(
    app: tether.App, caplog: pytest.LogCaptureFixture
) -> None:
    # The completer's 'stalled' event (a child died running the attempt) is not the reaper's:
    # the line names the child, not a worker that stopped renewing; child_exited is DEBUG.
    caplog.set_level(logging.DEBUG, logger="tether.jobs")
    ev = app.runtime.events
    ev.emit("claimed", job_id=9, attempt=1, worker="w", detail={"task": "t.ok", "queue": "q1"})
    ev.emit("stalled", job_id=9, attempt=1, worker="w", detail={
        "task": "t.ok", "queue": "q1", "kind": "stalled", "reason": "stalled", "delay": 0.0,
        "error": "child process 42 running the job died: killed by signal SIGSEGV (11)",
        "child": 42})
    ev.emit("child_exited", job_id=9, attempt=1, worker="w", detail={
        "child": 42, "status": "killed by signal SIGSEGV (11)", "why": "crashed", "jobs": 3})
    stalled, exited = records(caplog, 9)[1:]
    assert stalled.levelno == logging.WARNING
    assert "the process running its handler died" in stalled.getMessage()
    assert "stopped renewing" not in stalled.getMessage()
    assert (stalled.child, stalled.outcome, stalled.reason) == (42, "stalled", "stalled")  # type: ignore[attr-defined]
    assert stalled.duration >= 0  # type: ignore[attr-defined]
    assert exited.levelno == logging.DEBUG and exited.child == 42  # type: ignore[attr-defined]
    assert "SIGSEGV" in exited.getMessage()
