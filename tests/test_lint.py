"""Static checks are part of the suite: ``mypy --strict`` and ``ruff`` over the package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_mypy_strict() -> None:
    result = _run(sys.executable, "-m", "mypy", "--strict", "src/tether")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(120)
def test_ruff() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    result = _run(ruff, "check", "src", "tests", "bench", "examples")
    assert result.returncode == 0, result.stdout + result.stderr
