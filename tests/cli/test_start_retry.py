"""A worker started before its store is up waits for it, retrying with backoff, and a stop
signal ends the wait cleanly; a configuration error still exits at once (issue 18 F)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tether
from tests.crash.harness import wait_for
from tests.faults import FaultProxy
from tests.servers import isolated_url

pytestmark = [pytest.mark.slow, pytest.mark.crash]

APP = '''
import tether

app = tether.App()


@app.task(name="late.add")
def add(a: int, b: int) -> int:
    return a + b
'''
PORTS = {"postgres": 5432, "redis": 6379}


@pytest.fixture(params=sorted(PORTS))
def real_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with isolated_url(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def proxy(real_url: str) -> Iterator[FaultProxy]:
    port = PORTS["redis" if real_url.startswith("redis") else "postgres"]
    faults = FaultProxy("127.0.0.1", port)
    faults.refuse(3600)  # the store is "not up yet": connections are refused
    yield faults
    faults.stop()


def start(tmp_path: Path, url: str, *argv: str) -> tuple[subprocess.Popen[bytes], Path]:
    (tmp_path / "late_app.py").write_text(APP)
    log = tmp_path / "worker.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tether", "worker", "late_app:app", "--url", url, *argv],
            cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, env=env)
    return proc, log


def retries(log: Path, proc: subprocess.Popen[bytes] | None = None) -> list[str]:
    if proc is not None and proc.poll() is not None:
        raise AssertionError(f"the worker exited ({proc.returncode}): {log.read_text()}")
    return [line for line in log.read_text().splitlines()
            if " WARNING " in line and "store unavailable" in line and "retrying in" in line]


def test_a_worker_waits_for_a_store_that_is_not_up_yet(
    tmp_path: Path, real_url: str, proxy: FaultProxy
) -> None:
    url = proxy.url(real_url)
    proc, log = start(tmp_path, url, "--burst")
    try:
        seen = wait_for(lambda: len(retries(log, proc)) >= 2 and retries(log), 60,
                        "two retry lines", interval=0.05)
        assert proc.poll() is None, log.read_text()
        assert f"127.0.0.1:{proxy.port}" in seen[0], seen[0]
        app = tether.App(real_url)
        try:
            job = app.enqueue("late.add", 2, 3)
            proxy.restore()
            assert proc.wait(timeout=120) == 0, log.read_text()
            assert app.get_job(job).result_value == 5, log.read_text()
        finally:
            app.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_stop_signal_ends_the_wait_cleanly(
    tmp_path: Path, real_url: str, proxy: FaultProxy
) -> None:
    proc, log = start(tmp_path, proxy.url(real_url))
    try:
        wait_for(lambda: retries(log, proc), 60, "a retry line", interval=0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()
        assert "Traceback" not in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_configuration_errors_still_exit_at_once(tmp_path: Path) -> None:
    """A missing SQLite directory is a configuration error, not an outage: tether never
    creates directories, and waiting would not make one appear."""
    for url, words in ((f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}", "directory"),
                       ("postgresql://postgres@127.0.0.1:5432/no_such_db_x", "does not exist"),
                       ("redis://127.0.0.1:6379/0?nope=1", "unknown parameter")):
        proc, log = start(tmp_path, url)
        code = proc.wait(timeout=60)
        text = log.read_text()
        assert code == 2, (url, text)
        assert words in text and len(text.strip().splitlines()) == 1, (url, text)
