"""Smoke run of bench/workflows.py (issue #20) with tiny sizes, so it cannot rot: the fan-out
and the chain on SQLite, in a child process, report positive figures and the chain's last
result proves every step was given the one before's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.workflows import main

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def test_workflows_bench_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "wf.json"
    assert main(["--stores", "sqlite", "--runs", "1", "--fanout", "50", "--chain", "5",
                 "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| chain run (ms/step) |" in table
    results = json.loads(out.read_text())["results"]["sqlite"]
    assert all(len(v) == 1 and v[0] >= 0 for v in results.values()), results
    assert results["release_ms"][0] > 0 and results["drain_rate"][0] > 0
