"""A real ``tether worker`` subprocess through ``tether://`` drains a queue (issue #21)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tether._server.serve import TetherServer
from tether.stores import NewJob, Store

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
