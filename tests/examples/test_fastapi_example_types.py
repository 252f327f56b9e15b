"""The FastAPI example is typed code users copy: ``mypy --strict`` accepts it (enqueue options
through ``task.options(...)``, ``await_result`` typed by the task's return annotation)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.examples.conftest import EXAMPLES


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_mypy_strict_accepts_the_fastapi_example(tmp_path: Path) -> None:
    app = EXAMPLES / "fastapi_app"
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path),
         "--no-pretty", "--no-color-output", "main.py", "tasks.py"],
        cwd=app, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
