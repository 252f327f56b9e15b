"""Smoke run of bench/remote.py (issue #21) with tiny sizes, so it cannot rot: the drain and
the pick-up latency on SQLite, direct and through a real ``tether server``, each in its own
child process. The targets are not asserted here (tiny sizes on a shared machine say nothing
about them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.remote import main

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def test_remote_bench_runs_both_modes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "remote.json"
    assert main(["--stores", "sqlite", "--runs", "1", "--jobs", "60", "--latency-jobs", "5",
                 "--latency-gap", "0.02", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| sqlite |" in table
    results = json.loads(out.read_text())["results"]
    for mode in ("direct", "remote"):
        [drain] = results["drain"]["sqlite"][mode]
        assert drain["rate"] > 0 and drain["worker_us"] >= 0
        [latency] = results["latency"]["sqlite"][mode]
        assert 0 < latency["p50"] <= latency["p99"] <= latency["max"]
    assert results["drain"]["sqlite"]["remote"][0]["server_us"] > 0
