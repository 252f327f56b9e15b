"""Helpers for the runnable examples: their directories, a clean environment for their
subprocesses, and stopping a server or worker we started (by its pid)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def example_env(**extra: str) -> dict[str, str]:
    """The test's environment for an example process: the repository's ``src`` importable
    (an editable install has it anyway), no inherited TETHER_URL or Django settings."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TETHER_URL", "DJANGO_SETTINGS_MODULE", "TETHER_APP")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def stop(proc: subprocess.Popen[str], timeout: float = 30) -> int:
    """SIGTERM (a worker drains and exits 0), then SIGKILL if it hangs; the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            raise
    return proc.returncode


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts; any still running at the end are killed (by pid)."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


PYTHON = sys.executable
