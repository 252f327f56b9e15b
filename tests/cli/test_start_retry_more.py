"""The programmatic worker (``app.worker().run()``), a burst run through the API and
``tether reaper`` wait for a store that is not up yet, as ``tether worker`` does, and a
SIGTERM during that wait ends them at once with exit 0 (issue 18 F, follow-up).

The store is "not up yet": the fault proxy refuses connections until the test heals it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tether
from tests.cli.test_start_retry import APP, PORTS, retries
from tests.crash.harness import wait_for
from tests.faults import FaultProxy
from tests.servers import isolated_url
from tether.stores import NewJob, open_store

pytestmark = [pytest.mark.slow, pytest.mark.crash, pytest.mark.timeout(180)]

#: A program using the API: ``run`` (a worker until SIGTERM) or ``burst`` (until idle).
RUNNER = '''
import logging
import sys

import tether
from tether._worker.burst import run_burst

logging.basicConfig(level=logging.INFO,
                    format="%(asctime)s %(levelname)s %(name)s %(message)s")
app = tether.App(sys.argv[1])


@app.task(name="late.add")
def add(a: int, b: int) -> int:
    return a + b


worker = app.worker(concurrency=1, schedules=sys.argv[2] != "burst")
print("worker built", flush=True)
sys.exit(run_burst(worker).exit_code if sys.argv[2] == "burst" else worker.run())
'''


@pytest.fixture(params=sorted(PORTS))
def real_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with isolated_url(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def proxy(real_url: str) -> Iterator[FaultProxy]:
    faults = FaultProxy("127.0.0.1", PORTS["redis" if real_url.startswith("redis") else
                                           "postgres"])
    faults.refuse(3600)  # the store is "not up yet": connections are refused
    yield faults
    faults.stop()


@pytest.fixture
def migrated(real_url: str) -> str:
    """The store exists (a restarted server): only the network to it is down."""
    tether.App(real_url).close()
    store = open_store(real_url)
    store.migrate()
    store.close()
    return real_url


def launch(tmp_path: Path, argv: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
    (tmp_path / "runner.py").write_text(RUNNER)
    (tmp_path / "late_app.py").write_text(APP)
    log = tmp_path / "out.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, *argv], cwd=tmp_path, stdout=out,
                                stderr=subprocess.STDOUT, env=env)
    return proc, log


def argv_for(mode: str, url: str) -> list[str]:
    if mode == "reaper":
        return ["-m", "tether", "reaper", "--url", url, "--lease-ttl", "2", "--no-election"]
    if mode == "cli-burst":
        return ["-m", "tether", "worker", "late_app:app", "--burst", "--url", url]
    return ["runner.py", url, mode]


def waiting(log: Path, proc: subprocess.Popen[bytes], n: int = 2) -> list[str]:
    """At least ``n`` retry lines were logged (AssertionError once the process exited)."""
    return wait_for(lambda: len(retries(log, proc)) >= n and retries(log), 60,
                    f"{n} retry lines", interval=0.05)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("mode", ["run", "burst"])
def test_an_api_worker_waits_for_the_store_then_works(
    tmp_path: Path, migrated: str, proxy: FaultProxy, mode: str
) -> None:
    proc, log = launch(tmp_path, argv_for(mode, proxy.url(migrated)))
    try:
        seen = waiting(log, proc)
        assert f"127.0.0.1:{proxy.port}" in seen[0], seen[0]
        assert "worker built" in log.read_text(), "constructing a Worker must not block"
        app = tether.App(migrated)
        try:
            job = app.enqueue("late.add", 2, 3)
            proxy.restore()
            if mode == "burst":
                assert proc.wait(timeout=120) == 0, log.read_text()
            else:
                wait_for(lambda: app.get_job(job).status == "done" or proc.poll() is not None,
                         120, "the job to run", interval=0.05)
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=60) == 0, log.read_text()
            assert app.get_job(job).result_value == 5, log.read_text()
        finally:
            app.close()
    finally:
        stop(proc)


def test_the_reaper_waits_for_the_store_then_reaps(
    tmp_path: Path, migrated: str, proxy: FaultProxy
) -> None:
    store = open_store(migrated)
    proc, log = launch(tmp_path, argv_for("reaper", proxy.url(migrated)))
    try:
        ids = store.enqueue([NewJob("t"), NewJob("t")])
        store.claim("dead-worker", ["default"], 2, 1.0)  # nobody will renew these
        waiting(log, proc)
        proxy.restore()

        def reaped() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"the reaper exited: {log.read_text()}")
            jobs = [store.get_job(i) for i in ids]
            return all(j is not None and (j.status, j.stall_count) == ("pending", 1)
                       for j in jobs)

        wait_for(reaped, 60, "the reaper to reap", interval=0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        stop(proc)
        store.close()


@pytest.mark.parametrize("mode", ["run", "burst", "cli-burst", "reaper"])
def test_sigterm_while_waiting_exits_at_once_with_0(
    tmp_path: Path, real_url: str, proxy: FaultProxy, mode: str
) -> None:
    proc, log = launch(tmp_path, argv_for(mode, proxy.url(real_url)))
    try:
        waiting(log, proc, 1)
        proc.send_signal(signal.SIGTERM)
        # Promptly: within a few seconds, although the next try is up to 30 s away.
        assert proc.wait(timeout=5) == 0, log.read_text()
        text = log.read_text()
        assert "Traceback" not in text, text
        assert "stopped before the store" in text, text
        assert "no longer waiting for the store" in text and "draining" not in text, text
    finally:
        stop(proc)
