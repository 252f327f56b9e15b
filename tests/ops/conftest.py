from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
Spawn = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """Start ``tether ...`` subprocesses (killed, by pid, at the end of the test)."""
    procs: list[subprocess.Popen[str]] = []

    def _spawn(*argv: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}  # env may set it
        proc = subprocess.Popen([sys.executable, "-m", "tether", *argv], cwd=ROOT, env=full,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc

    yield _spawn
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=15)


def run_cli(*argv: str, env: dict[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "tether", *argv], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=timeout, check=False)
