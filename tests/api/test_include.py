"""``App(include=[...])``: tasks declared in modules the app module does not import are known
to ``tether worker MODULE:APP`` (thread and process pools), and to a lookup by name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

import tether
from tests.servers import STORE_KINDS

pytestmark = pytest.mark.timeout(90)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def producer(store_url: str) -> Iterator[tether.App]:
    app = tether.App(store_url)  # knows no task: enqueues by name, like a remote producer
    yield app
    app.close()


# A worker in another process cannot reach a memory store (one per process): the server stores.
@pytest.mark.slow
@pytest.mark.parametrize("store_kind", STORE_KINDS)
@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_worker_runs_tasks_of_included_modules(
    producer: tether.App, store_url: str, tmp_path: Path, pool: str,
) -> None:
    first = producer.enqueue("proj.double", 21, queue="proj")
    second = producer.enqueue("proj.next_day", date(2026, 2, 28), queue="proj")
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tether._cli.main", "worker", "tests.api.proj.core:app",
             "-c", "1", "--pool", pool],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            env=dict(os.environ, TETHER_URL=store_url, PYTHONUNBUFFERED="1"))
    try:
        result = producer.wait(first, timeout=60)
        assert result["double"] == 42
        assert (result["pid"] == proc.pid) == (pool == "thread")
        # the producer does not know the task: the result is plain JSON
        assert producer.wait(second, timeout=30) == "2026-03-01"
    except BaseException:
        print(log.read_text(errors="replace"))
        raise
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        proc.wait(30)


def test_a_lookup_by_name_imports_the_included_modules(
    monkeypatch: pytest.MonkeyPatch, store_url: str,
) -> None:
    from tests.api.proj import core

    app = tether.App(store_url, include=["tests.api.proj.tasks"])
    monkeypatch.setattr(core, "app", app)  # the included module registers on this app
    monkeypatch.delitem(sys.modules, "tests.api.proj.tasks", raising=False)
    try:
        assert app.runtime.registry.tasks == {}
        task = app.find_task("proj.next_day")
        assert task is not None and task.name == "proj.next_day"
        assert "tests.api.proj.tasks" in sys.modules and "proj.double" in app.runtime.registry.tasks
        assert app.find_task("proj.nothing") is None
        job = app.get_job(app.enqueue("proj.next_day", date(2026, 1, 31)))
        assert job.args == [date(2026, 1, 31)], "decoded by the task's annotations"
        assert app.runtime.registry.queues() == ["proj"]
    finally:
        sys.modules.pop("tests.api.proj.tasks", None)
        app.close()


def test_an_include_that_fails_to_import_names_the_module(store_url: str) -> None:
    for module, why in [("tests.api.proj.broken", "broken on purpose"),
                        ("tests.api.proj.missing", "No module named")]:
        app = tether.App(store_url, include=[module])
        with pytest.raises(tether.ConfigError, match=module.replace(".", r"\.")) as caught:
            app.worker()
        assert why in str(caught.value) and "App(include=...)" in str(caught.value)
        with pytest.raises(tether.ConfigError, match=module.replace(".", r"\.")):
            app.find_task("anything")
        app.close()
    with pytest.raises(tether.ConfigError, match="include must be module names"):
        tether.App(store_url, include=[""])


def test_the_worker_command_reports_a_broken_include(store_url: str, tmp_path: Path) -> None:
    (tmp_path / "brokenproj.py").write_text(
        "import tether\napp = tether.App(include=['tests.api.proj.broken'])\n")
    result = subprocess.run(
        [sys.executable, "-m", "tether._cli.main", "worker", "brokenproj:app"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        env=dict(os.environ, TETHER_URL=store_url, PYTHONPATH=str(ROOT)))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "tests.api.proj.broken" in result.stderr and "broken on purpose" in result.stderr


def test_a_broken_include_does_not_break_reading_jobs(store_url: str) -> None:
    app = tether.App(store_url, include=["tests.api.proj.broken"])
    try:
        job_id = app.enqueue_jobs([tether._task.make_new_job("proj.double", (2,), {})])[0]
        assert app.get_job(job_id).args == [2]  # plain JSON; the worker reports the include
    finally:
        app.close()


def test_async_reads_import_the_included_modules_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch, store_url: str,
) -> None:
    """``aget_job`` / ``await_result`` of a task the app does not know yet import the
    ``include`` modules first; an import reads files and runs module code (a Django project's
    takes seconds), so it must run on a thread, never on the caller's loop."""
    import asyncio
    import importlib
    import threading

    from tests.api.proj import core

    app = tether.App(store_url, include=["tests.api.proj.tasks"])
    monkeypatch.setattr(core, "app", app)
    monkeypatch.delitem(sys.modules, "tests.api.proj.tasks", raising=False)
    imported_on: list[int] = []
    real_import = importlib.import_module

    def watched(name: str, package: str | None = None) -> object:
        if name == "tests.api.proj.tasks":
            imported_on.append(threading.get_ident())
        return real_import(name, package)

    remote = tether.App(store_url)  # knows no task: enqueues by name
    job_id = remote.enqueue("proj.next_day", date(2026, 1, 31))
    monkeypatch.setattr(importlib, "import_module", watched)
    assert app.runtime.registry.tasks == {}

    async def main() -> tuple[int, list[object]]:
        try:
            job = await app.aget_job(job_id)
            with pytest.raises(TimeoutError):
                await app.await_result(job_id, timeout=0)
            return threading.get_ident(), job.args
        finally:
            await app.aclose()

    try:
        loop_thread, args = asyncio.run(main())
        assert imported_on and loop_thread not in imported_on, "imported on the event loop"
        assert args == [date(2026, 1, 31)], "decoded by the included task's annotations"
    finally:
        sys.modules.pop("tests.api.proj.tasks", None)
        remote.close()


def test_a_broken_include_is_never_retried_on_the_event_loop(
    monkeypatch: pytest.MonkeyPatch, store_url: str,
) -> None:
    """A broken include stays unimported, so every read tries it again: the async reads must
    make those attempts on a thread too, not only the first one."""
    import asyncio
    import importlib
    import threading

    app = tether.App(store_url, include=["tests.api.proj.broken"])
    attempts: list[int] = []
    real_import = importlib.import_module

    def watched(name: str, package: str | None = None) -> object:
        if name == "tests.api.proj.broken":
            attempts.append(threading.get_ident())
        return real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", watched)

    async def main() -> int:
        try:
            job_id = (await app.aenqueue_jobs(
                [tether._task.make_new_job("proj.double", (2,), {})]))[0]
            for _ in range(3):
                assert (await app.aget_job(job_id)).args == [2]
            assert await app.acancel(job_id) == "cancelled"
            with pytest.raises(tether.JobWasCancelled):
                await app.await_result(job_id, timeout=5)
            return threading.get_ident()
        finally:
            await app.aclose()

    loop_thread = asyncio.run(main())
    assert len(attempts) >= 4, attempts
    assert loop_thread not in attempts, "an import was tried on the event loop"
