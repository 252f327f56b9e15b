"""The process pool run in-process (the worker on a thread of the test): outcomes decided in a
child match the thread pool's, ``current_job()`` crosses the pipe, and options are checked."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import tether
from tests.worker.helpers import running, wait_until
from tests.worker.pool_tasks import register
from tether import _payload as payload
from tether._appspec import derive_spec
from tether._cli.main import build_parser
from tether._events import Event
from tether._worker.poolconfig import CHILD_ENV, make_pool_config

pytestmark = pytest.mark.timeout(60)
MakeApp = Callable[..., tether.App]
SPEC = "tests.worker.pool_tasks:app"


def test_outcomes_and_context_cross_the_process_boundary(make_app: MakeApp) -> None:
    app = make_app()
    register(app)

    @app.task(name="pool.parent_only")
    def parent_only() -> None:  # the children's app has no such task
        return None

    completed: list[Event] = []
    app.on("completed", completed.append)
    t = app.runtime.registry.tasks
    ids = {
        "add": t["pool.add"].enqueue(2, 3),
        "amul": t["pool.amul"].enqueue(6, 7),
        "fail": t["pool.fail"].enqueue(),
        "flaky": t["pool.flaky"].enqueue(),
        "later": t["pool.later"].enqueue(),
        "unjson": t["pool.unjson"].enqueue(),
        "txn": t["pool.txn"].enqueue(),
        "ckpt": t["pool.ckpt"].enqueue("héllo \n\"quoted\" ✓"),
        "parent_only": parent_only.enqueue(),
    }
    with running(app, concurrency=2, pool="process", app_spec=SPEC) as worker:
        wait_until(lambda: all(app.get_job(i).status in ("done", "failed")
                               for i in ids.values()), 30, "every job to end")
        children = set(worker.pool.pids())
    jobs = {name: app.get_job(i) for name, i in ids.items()}

    assert jobs["add"].result["sum"] == 5
    assert jobs["amul"].result["product"] == 42
    ran_in = {jobs["add"].result["pid"], jobs["amul"].result["pid"]}
    assert os.getpid() not in ran_in and ran_in <= children
    assert (jobs["fail"].status, jobs["fail"].failure_reason, jobs["fail"].failures) == (
        "failed", "error", 1)
    assert (jobs["fail"].last_error or "").startswith("Fail: bad input")
    assert (jobs["flaky"].status, jobs["flaky"].attempt, jobs["flaky"].failures) == (
        "done", 3, 2)
    assert [e["error"].splitlines()[0] for e in jobs["flaky"].errors] == [
        "RuntimeError: boom 1", "RuntimeError: boom 2"]
    assert (jobs["later"].status, jobs["later"].attempt) == ("done", 2)
    assert jobs["unjson"].status == "failed"
    assert "JSON-serializable" in (jobs["unjson"].last_error or "")
    assert jobs["txn"].status == "failed"
    assert "process-pool child" in (jobs["txn"].last_error or "")
    assert (jobs["parent_only"].status, jobs["parent_only"].failure_reason) == (
        "failed", "unknown_task")

    ckpt = jobs["ckpt"]
    text = "héllo \n\"quoted\" ✓"
    assert ckpt.status == "done"
    assert ckpt.result == {
        "dedup": f"{ckpt.id}:1:{ckpt.uid}", "queue": "default", "seen": None,
        "checkpoint": {"seen": None, "n": 1}, "progress": {"at": 1, "text": text},
        "text": text}
    assert ckpt.checkpoint == {"seen": None, "n": 1}
    raw = app.store.get_job(ckpt.id)
    assert raw is not None and raw.checkpoint == '{"seen":null,"n":1}'
    assert raw.progress == payload.dumps({"at": 1, "text": text}), "stored as the child sent it"
    by_job = {e.job_id: e for e in completed}
    assert by_job[ids["add"]].detail["child"] == jobs["add"].result["pid"]


def test_options_are_checked_before_anything_starts(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    app = tether.App(f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(tether.ConfigError, match="pool must be 'thread' or 'process'"):
        app.worker(pool="fork")
    with pytest.raises(tether.ConfigError, match="only apply to pool='process'"):
        app.worker(max_tasks_per_child=3)
    with pytest.raises(tether.ConfigError, match=r"app_spec=.package\.module:app."):
        app.worker(pool="process")  # made inside this function: no importable name
    with pytest.raises(tether.ConfigError, match="expected MODULE:APP"):
        app.worker(pool="process", app_spec="not a spec")
    with pytest.raises(tether.ConfigError, match="max_tasks_per_child"):
        app.worker(pool="process", app_spec=SPEC, max_tasks_per_child=0)
    with pytest.raises(tether.ConfigError, match="max_memory_per_child"):
        app.worker(pool="process", app_spec=SPEC, max_memory_per_child=-1)
    monkeypatch.setenv(CHILD_ENV, str(os.getpid()))
    with pytest.raises(tether.ConfigError, match=r"guard app\.run_worker"):
        make_pool_config(app.runtime, "thread")


def test_spec_is_derived_from_the_module_holding_the_app() -> None:
    from tests.worker import pool_tasks

    assert derive_spec(pool_tasks.app.runtime) == SPEC
    config = make_pool_config(pool_tasks.app.runtime, "process", max_memory_per_child=100)
    assert (config.kind, config.app_spec, config.max_memory_per_child) == (
        "process", SPEC, 100.0)


def test_a_child_that_cannot_load_the_app_fails_the_start(tmp_path: Path) -> None:
    app = tether.App(f"sqlite:///{tmp_path / 'x.db'}")
    worker = app.worker(pool="process", app_spec="tests.worker.no_such_module:app",
                        concurrency=1)
    with pytest.raises(tether.ConfigError, match="no_such_module"):
        worker.run(install_signals=False)
    assert app.store.list_workers() == []


def test_cli_options() -> None:
    args = build_parser().parse_args(["worker", "m:app", "--pool", "process", "-c", "3",
                                      "--max-tasks-per-child", "7",
                                      "--max-memory-per-child", "256"])
    assert (args.pool, args.concurrency, args.max_tasks_per_child,
            args.max_memory_per_child) == ("process", 3, 7, 256.0)
    assert build_parser().parse_args(["worker", "m:app"]).pool == "thread"
