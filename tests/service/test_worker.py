"""A real ``tether worker`` subprocess through ``tether://`` drains a queue (issue #21)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tether._server.serve import TetherServer
from tether.stores import JobRecord, NewJob, Store

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_a_real_worker_drains_through_the_server(
    serve: Callable[..., TetherServer], backing: Store
) -> None:
    backing.migrate()
    server = serve()
    ids = backing.enqueue([NewJob("bench.noop") for _ in range(50)])
    env = {**os.environ, "TETHER_URL": f"tether://127.0.0.1:{server.port}",
           "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "tether", "worker", "bench.apps:app", "--burst", "-c", "4",
         "--log-level", "WARNING"], env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    jobs = backing.get_jobs(ids)
    assert {j.status for j in jobs} == {"done"}
    assert all(j.attempt == 1 for j in jobs)
    assert backing.list_workers() == []  # it unregistered through the server


def test_a_process_pool_worker_drains_through_the_server(
    serve: Callable[..., TetherServer], backing: Store
) -> None:
    """``--pool process`` works unchanged through ``tether://``: the parent holds the remote
    store and the leases; its children only run handlers."""
    backing.migrate()
    server = serve()
    ids = backing.enqueue([NewJob("bench.noop") for _ in range(30)])
    env = {**os.environ, "TETHER_URL": f"tether://127.0.0.1:{server.port}",
           "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "tether", "worker", "bench.apps:app", "--burst", "-c", "2",
         "--pool", "process", "--log-level", "WARNING"], env=env, cwd=ROOT,
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    jobs = backing.get_jobs(ids)
    assert {j.status for j in jobs} == {"done"}
    assert all(j.attempt == 1 for j in jobs)


def test_periodic_jobs_tick_through_the_server(
    serve: Callable[..., TetherServer], backing: Store, tmp_path: Path
) -> None:
    """A worker's maintainer leads the election and ticks the app's schedule through
    ``tether://``, and the tick jobs run: periodic jobs work unchanged."""
    backing.migrate()
    server = serve()
    env = {**os.environ, "TETHER_URL": f"tether://127.0.0.1:{server.port}",
           "PYTHONPATH": str(ROOT), "TETHER_TEST_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tether", "worker", "tests.crash.periodic_app:app",
         "--log-level", "WARNING"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    try:
        give_up = time.monotonic() + 60  # a safety net: the loop waits on the store
        done: list[JobRecord] = []
        while len(done) < 2:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < give_up, "no tick job ran through the server"
            done = [j for j in backing.list_jobs(status="done", limit=100)
                    if j.task == "crash.beat"]
            time.sleep(0.1)
        assert [s.name for s in backing.schedules()] == ["crash.every_second"]
        assert all(j.queue == "periodic" and j.result is not None for j in done)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
