"""The typed API, checked by mypy itself: wrong arguments to ``enqueue`` are rejected with
mypy's own message, and ``wait`` is typed by the task's return annotation."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "tests" / "typing"


# One test process for the module: its module-scoped fixture is built once, not once per
# process.
pytestmark = pytest.mark.xdist_group("api-typing")


@pytest.fixture(scope="module")
def mypy_output(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """One mypy run over both samples (about 10 s); lines grouped by sample file."""
    cache = tmp_path_factory.mktemp("mypy-cache")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache),
         "--show-error-codes", "--no-pretty", "--no-color-output",
         str(SAMPLES / "sample_ok.py"), str(SAMPLES / "sample_bad.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    lines: dict[str, list[str]] = {"ok": [], "bad": []}
    for line in result.stdout.splitlines():
        for name, found in lines.items():
            if f"sample_{name}.py:" in line:
                found.append(line.split(f"sample_{name}.py:", 1)[1])
    return lines


@pytest.mark.timeout(300)
def test_mypy_accepts_correct_code(mypy_output: dict[str, list[str]]) -> None:
    errors = [line for line in mypy_output["ok"] if ": error:" in line]
    assert errors == []


@pytest.mark.timeout(300)
def test_wait_is_typed_by_the_task_result(mypy_output: dict[str, list[str]]) -> None:
    revealed = [re.sub(r"^\d+: note: Revealed type is ", "", line)
                for line in mypy_output["ok"] if "Revealed type" in line]
    assert revealed == [
        '"tether._jobid.JobId[int]"',  # add.enqueue(1, 2)
        '"int"',                      # app.wait(add.enqueue(1, 2))
        '"list[float]"',              # an async task: what its coroutine returns
        '"Any"',                      # app.wait(7): a plain int says nothing
        '"tether._jobid.JobId[int]"',  # add.s(1, 2).enqueue(): a signature keeps R
        '"int"',                      # await app.await_result(JobId[int])
    ]


@pytest.mark.timeout(300)
def test_mypy_rejects_wrong_arguments(mypy_output: dict[str, list[str]]) -> None:
    bad = mypy_output["bad"]
    expected = [
        '15: error: Argument 1 to "enqueue" of "Task" has incompatible type "str"; '
        'expected "int"  [arg-type]',
        '15: error: Argument 2 to "enqueue" of "Task" has incompatible type "str"; '
        'expected "int"  [arg-type]',
        '16: error: Missing positional argument "b" in call to "enqueue" of "Task"  '
        '[call-arg]',
        '17: error: Incompatible types in assignment (expression has type "int", variable '
        'has type "str")  [assignment]',
        '18: error: Argument "b" to "enqueue" of "Enqueuer" has incompatible type "str"; '
        'expected "int"  [arg-type]',
        '22: error: Argument 1 to "aenqueue" of "Task" has incompatible type "str"; '
        'expected "int"  [arg-type]',
        '25: error: Argument "b" to "aenqueue" of "Enqueuer" has incompatible type "str"; '
        'expected "int"  [arg-type]',
    ]
    assert bad == expected
