"""Smoke run of bench/flow.py (issue #19) with tiny sizes, so it cannot rot: every mode on
SQLite, each in its own child process, drains and reports a positive rate. The 70 % target is
not asserted here (tiny sizes on a shared machine say nothing about it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.flow import main

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_flow_bench_runs_every_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "flow.json"
    assert main(["--stores", "sqlite", "--runs", "1", "--jobs", "60", "--keys", "6",
                 "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| sqlite | none |" in table and "| sqlite | key |" in table
    results = json.loads(out.read_text())["results"]["sqlite"]
    assert len(results["none"]) == 1 and results["none"][0] > 0
    assert len(results["key"]) == 1 and results["key"][0] > 0
    assert "main" not in results  # no --main: that mode is not run
    cpu = json.loads(out.read_text())["cpu_us"]["sqlite"]
    assert len(cpu["key"]) == 1 and cpu["key"][0] >= 0
