"""Smoke run of the benchmark harness (bench/) with tiny sizes, so it cannot rot.

Every scenario on each store, one run each: it must finish without errors, produce positive
rates and write both report files. Targets are not asserted here (tiny sizes on a shared
machine say nothing about them); ``python -m bench run`` is the measurement.
Deselect with ``-m "not slow"``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import report
from bench.__main__ import main, run_all
from bench.common import Config
from bench.scenarios import ORDER
from tests.servers import STORE_KINDS, require_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


# A guard against a hang, not a speed target: the run starts some 15 worker processes, and on a
# loaded 2-core CI machine each start alone took 2-5 s (64 s in all for PostgreSQL there, and
# 150+ s with the cores saturated). The smoke preset keeps the sizes and repeats minimal.
@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", STORE_KINDS)
def test_every_scenario_runs(kind: str, tmp_path: Path) -> None:
    if kind != "sqlite":
        require_server(kind)
    cfg = Config.preset_named("smoke")
    data = run_all(cfg, [kind], ORDER, tmp_path, "smoke", "pytest smoke")

    assert report.rates_are_sane(data) == []
    scenarios = {r["scenario"] for r in data["results"]}
    assert scenarios == set(ORDER)
    figures = {(r["scenario"], f["name"]): f for r in data["results"] for f in r["figures"]}
    drain = [f for (s, _), f in figures.items() if s == "drain" and f["unit"] == "jobs/s"]
    assert drain and all(f["median"] > 0 for f in drain)
    assert any(s == "recovery" and f["n"] == 2 for (s, _), f in figures.items())

    written = json.loads((tmp_path / "smoke.json").read_text())
    assert written["header"]["versions"]["tether"]
    assert written["header"]["machine"]["cores"] >= 1
    markdown = (tmp_path / "smoke.md").read_text()
    assert "## Targets" in markdown and f"| {kind} |" in markdown


def test_cli_render_and_arguments(tmp_path: Path) -> None:
    code = main(["run", "--preset", "smoke", "--stores", "sqlite", "--scenarios", "enqueue",
                 "--out", str(tmp_path), "--name", "cli"])
    assert code == 0
    data = json.loads((tmp_path / "cli.json").read_text())
    assert data["header"]["settings"]["enqueue_jobs"] == 50
    (tmp_path / "cli.md").unlink()
    assert main(["render", str(tmp_path / "cli.json")]) == 0
    assert (tmp_path / "cli.md").read_text().startswith("# tether benchmarks (smoke)")
