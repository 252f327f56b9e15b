"""Smoke runs of issue #23's measuring tools at tiny sizes, so they cannot rot: the bare loops
and bare writers of every store (bench.bare), the worker process tree's CPU read from /proc,
``python -m bench.speed`` and ``bench.timeline``. Not timings: each must run and report a
positive rate and CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import bare, timeline
from bench.apps import make_app
from bench.bare import inserts
from bench.common import ROOT, Config, isolated
from bench.procs import tree_cpu_seconds
from bench.speed import main as speed_main
from tests.servers import STORE_KINDS, require_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_bare_loop_drains_and_reports(kind: str) -> None:
    if kind != "sqlite":
        require_server(kind)
    with isolated(kind, Config()) as url:
        # A heartbeat every 10 ms, so the renewal runs during the drain too.
        result = bare.run(kind, url, 300, batch=100, heartbeat_every=0.01)
    assert result.jobs == 300
    assert result.rate > 0 and result.cpu_per_job > 0


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_bare_loop_over_tethers_own_table_finishes_every_job(kind: str) -> None:
    # The same protocol over tether's jobs table: every row tether enqueued ends done, fenced.
    if kind != "sqlite":
        require_server(kind)
    with isolated(kind, Config()) as url:
        result = bare.run(kind, url, 300, batch=100, heartbeat_every=0.01, table="jobs")
        app = make_app(url)
        try:
            counts = {c.status: c.count for c in app.store.counts()}
        finally:
            app.close()
    assert result.jobs == 300 and result.rate > 0 and result.cpu_per_job > 0
    assert counts == {"done": 300}


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_bare_writers_return_new_ids(kind: str) -> None:
    if kind != "sqlite":
        require_server(kind)
    with isolated(kind, Config()) as url:
        w = inserts.writer(kind, url)
        try:
            first, second = w.one(), w.one()
            batch = w.many(50)
            if isinstance(w, inserts.PgWriter):
                assert w.copy(20) == 20
        finally:
            w.close()
    assert second > first
    assert len(batch) == 50 and len(set(batch)) == 50 and min(batch) > second


def test_tree_cpu_counts_reaped_children() -> None:
    # The parent burns no CPU itself; its child spins ~0.3 s of CPU and is reaped before the
    # parent says so: the tree's CPU must include it (cutime/cstime).
    code = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
            "'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.3: "
            "pass']); print('reaped', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "reaped"
        assert tree_cpu_seconds(proc.pid) >= 0.25
    finally:
        proc.communicate("")


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_speed_tool_runs(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if kind != "sqlite":
        require_server(kind)
    out = tmp_path / "speed.json"
    assert speed_main(["--base", str(ROOT), "--stores", kind, "--runs", "1", "--jobs", "500",
                       "--out", str(out)]) == 0
    assert f"| {kind} | this / base |" in capsys.readouterr().out
    samples = json.loads(out.read_text())["samples"][kind]
    for name in ("base", "this", "bare"):
        [s] = samples[name]
        assert s["rate"] > 0 and s["cpu_per_job"] > 0


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_timeline_reports_every_part(kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    # bench.timeline: a drain cut into parts, each with its rate and the store's own figures.
    if kind != "sqlite":
        require_server(kind)
    rates = timeline.run(kind, 400, 4, 2)
    out = capsys.readouterr().out
    assert len(rates) == 4 and all(r > 0 for r in rates)
    parts = [line for line in out.splitlines() if line.startswith("part ")]
    assert len(parts) == 4
    if kind == "redis":
        assert all("EVALSHA" in line for line in parts)
    if kind == "postgres":
        assert all("vacuums" in line for line in parts)
