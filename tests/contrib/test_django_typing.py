"""tether.contrib.django's enqueue helpers keep the task's types: mypy rejects wrong
arguments and knows the id's result type (``JobId[R] | None``: None while the job waits for
Django's commit)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = Path(__file__).with_name("typing_django_sample.py")


@pytest.mark.timeout(300)
def test_mypy_types_the_django_helpers(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path),
         "--show-error-codes", "--no-pretty", "--no-color-output", str(SAMPLE)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    lines = [line.split(".py:", 1)[1] for line in result.stdout.splitlines()
             if SAMPLE.name in line]
    assert lines == [
        '18: note: Revealed type is "tether._jobid.JobId[int] | None"',
        '19: note: Revealed type is "tether._jobid.JobId[int] | None"',
        '20: note: Revealed type is "list[tether._jobid.JobId[int]] | None"',
        '21: error: Argument 2 to "enqueue" has incompatible type "str"; expected "int"  '
        '[arg-type]',
        '21: error: Argument 3 to "enqueue" has incompatible type "str"; expected "int"  '
        '[arg-type]',
        '22: error: Argument "delay" to "enqueue_with" has incompatible type "str"; '
        'expected "float | None"  [arg-type]',
    ], result.stdout + result.stderr
