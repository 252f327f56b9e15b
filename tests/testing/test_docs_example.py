"""docs/testing.md's example project runs as written: its pyproject.toml options, its
``myproject/jobs.py`` and its ``tests/test_jobs.py`` blocks, in a fresh pytest session."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def _blocks() -> dict[str, str]:
    """Code blocks of the page by the file named on their first line (continued blocks of
    one file are joined)."""
    found: dict[str, str] = {}
    for _lang, body in re.findall(r"```(toml|python)\n(.*?)```", DOC.read_text(), re.S):
        first, _, rest = body.partition("\n")
        name = first.lstrip("# ").split(" ")[0]
        found[name] = found.get(name, "") + ("\n\n" if name in found else "") + rest
    return found


def test_the_documented_example_passes(pytester: pytest.Pytester) -> None:
    blocks = _blocks()
    assert set(blocks) >= {"pyproject.toml", "myproject/jobs.py", "tests/test_jobs.py"}
    pytester.makefile(".toml", pyproject=blocks["pyproject.toml"])
    (pytester.path / "myproject").mkdir()
    (pytester.path / "myproject" / "__init__.py").write_text("")
    (pytester.path / "myproject" / "jobs.py").write_text(blocks["myproject/jobs.py"])
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_jobs.py").write_text(blocks["tests/test_jobs.py"])
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "no:cacheprovider", "tests")
    result.assert_outcomes(passed=3)
