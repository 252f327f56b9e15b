"""The report: ``latest.json`` (every sample) and ``latest.md`` (the tables people read)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from bench.common import Outcome, fmt

_ALL = ("sqlite", "postgres", "redis")
_CPU_US = {"sqlite": 15, "postgres": 20, "redis": 20}
_BARE_X = {"sqlite": 0.3, "postgres": 0.6, "redis": 0.5}
_DEFAULTS = "-c 10, thread pool (the defaults)"

#: Issue #23's targets, the report's first table: (store, scenario, a substring of the figure
#: that carries the target, label, substrings of the figures shown beside it).
TARGETS_23: tuple[tuple[str, str, str, str, tuple[str, ...]], ...] = (
    *((s, "drain", f"worker CPU per job, {_DEFAULTS}",
       f"worker CPU per job <= {_CPU_US[s]} us (process tree, /proc)",
       ("bare loop CPU per job", "worker CPU per job / bare")) for s in _ALL),
    *((s, "drain", "tether drain / bare loop", f"drain >= {_BARE_X[s]} x its bare loop",
       (f"no-op jobs, {_DEFAULTS}", "bare loop (")) for s in _ALL),
    *((s, "enqueue", "enqueue_many / bare batch", "enqueue_many >= 0.6 x the bare batch insert",
       ("enqueue_many (", "bare batch:", "bare COPY (")) for s in _ALL),
    *((s, "enqueue", "single enqueue / bare round trip",
       "single enqueue <= 1.5 x the bare single round trip",
       ("single enqueue cost", "bare single:"))
      for s in _ALL),
    *((s, "pool", "process / thread drain, -c 10", "process pool >= 60 % of the thread pool",
       ("--pool thread -c 10", "--pool process -c 10")) for s in _ALL),
    *((s, "drain", "drain 1,000,000 vs ", "1,000,000 queued >= 90 % of the 10,000 rate",
       ("000,000 no-op jobs",)) for s in _ALL),
)

#: The targets of earlier briefs: (store, scenario, a substring of the figure name, label). A
#: target whose figure is absent from a run is listed as "not measured".
TARGETS: tuple[tuple[str, str, str, str], ...] = (
    ("sqlite", "drain", f"no-op jobs, {_DEFAULTS}", "SQLite drain at the defaults >= 15,000 "
     "jobs/s"),
    ("redis", "drain", "tether drain / saq", "Redis drain at the defaults >= 3x saq"),
    ("postgres", "enqueue", "enqueue_many (", "PG enqueue_many >= 30,000 jobs/s"),
    *((s, "startup", "to first job", "worker start to first job < 0.5 s") for s in
      ("sqlite", "postgres", "redis")),
    ("postgres", "latency", "p99", "pick-up p99 < 50 ms"),
    ("redis", "latency", "p99", "pick-up p99 < 50 ms"),
    *((s, "recovery", "p99", "recovery p99 <= lease_ttl + 1 s") for s in
      ("sqlite", "postgres", "redis")),
    *((s, "recovery", "max", "recovery max <= lease_ttl + stall_grace + 2 s") for s in
      ("sqlite", "postgres", "redis")),
    *((s, "heartbeat", "calls per interval", "one heartbeat statement per worker per interval")
      for s in ("sqlite", "postgres", "redis")),
    *((s, "reap", "reap sweep", "reap sweep < 50 ms with the history present") for s in
      ("sqlite", "postgres", "redis")),
    *((s, "reap", "claim of", "claim < 5 ms with the history present") for s in
      ("sqlite", "postgres", "redis")),
    *((s, "pool", "from worker learned it: max", "child dead <= 1 s after the worker learns")
      for s in ("sqlite", "postgres", "redis")),
)


def to_json(header: dict[str, Any], outcomes: list[Outcome]) -> dict[str, Any]:
    return {
        "header": header,
        "results": [
            {"store": o.store, "scenario": o.scenario, "seconds": round(o.seconds, 2),
             "error": o.error, "figures": [f.to_json() for f in o.figures]}
            for o in outcomes
        ],
    }


def _met(met: bool | None) -> str:
    return {True: "met", False: "**MISSED**", None: ""}[met]


def _num(x: Any) -> str:
    return "n/a" if x is None else fmt(float(x))


def _targets(data: dict[str, Any]) -> list[str]:
    figures = [f for r in data["results"] for f in r["figures"]]
    ran = {(r["store"], r["scenario"]): r for r in data["results"]}
    lines = ["| Target | Store | Figure | Median | Target value | Result |",
             "|---|---|---|---:|---|---|"]
    for store, scenario, key, label in TARGETS:
        hits = [f for f in figures if f["store"] == store and f["scenario"] == scenario
                and key in f["name"] and f["target"]]
        if not hits:
            r = ran.get((store, scenario))
            why = "not run" if r is None else ("error" if r["error"] else "not measured")
            lines.append(f"| {label} | {store} | | | | {why} |")
            continue
        for f in hits:
            lines.append(f"| {label} | {store} | {f['name']} | {_num(f['median'])} {f['unit']} "
                         f"| {f['target']} | {_met(f['met'])} |")
    return lines


def _targets_23(data: dict[str, Any]) -> list[str]:
    """Issue #23's table: each target, its measured median, met or missed, and the figures of
    the same run it was measured beside."""
    figures = [f for r in data["results"] for f in r["figures"]]
    ran = {(r["store"], r["scenario"]): r for r in data["results"]}
    lines = ["| Target | Store | Measured (median) | Result | Beside it, same run |",
             "|---|---|---:|---|---|"]
    for store, scenario, key, label, beside in TARGETS_23:
        mine = [f for f in figures if f["store"] == store and f["scenario"] == scenario]
        hits = [f for f in mine if key in f["name"] and f["target"]]
        if not hits:
            r = ran.get((store, scenario))
            why = "not run" if r is None else ("error" if r["error"] else "not measured")
            lines.append(f"| {label} | {store} | | {why} | |")
            continue
        context = "; ".join(f"{f['name']}: {_num(f['median'])} {f['unit']}" for f in mine
                            if any(b in f["name"] for b in beside) and f not in hits)
        for f in hits:
            what = f" ({f['name']})" if len(hits) > 1 else ""
            lines.append(f"| {label}{what} | {store} | {_num(f['median'])} {f['unit']} | "
                         f"{_met(f['met'])} | {context} |")
    return lines


def to_markdown(data: dict[str, Any]) -> str:
    h = data["header"]
    m, v = h["machine"], h["versions"]
    s = h["settings"]
    out = [
        f"# tether benchmarks ({s['preset']})",
        "",
        f"* Date: {h['date']}; command: `{h['command']}`",
        f"* Machine: {m['cpu_model']}, {m['cores']} cores, {m['memory_gib']} GiB RAM, "
        f"Linux {m['kernel']}; load average at start {', '.join(map(str, m['loadavg_at_start']))}",
        f"* Versions: Python {v['python']}, tether {v['tether']}, SQLite {v['sqlite']}, "
        f"PostgreSQL {v['postgresql']}, Redis {v['redis']}",
        "* Settings: " + ", ".join(f"{k}={val}" for k, val in s.items()),
        "* Each figure is the median of its samples (runs, or recovery trials where marked), "
        "with min and max.",
        "",
        "## #23 targets",
        "",
        "At the defaults (`-c 10`, thread pool); each ratio is taken run by run against its "
        "reference measured in the same run, the order alternating, and the median reported.",
        "",
        *_targets_23(data),
        "",
        "## Targets",
        "",
        *_targets(data),
        "",
    ]
    for scenario in dict.fromkeys(r["scenario"] for r in data["results"]):
        out += [f"## {scenario}", "",
                "| Store | Figure | Median | Min | Max | n | Target | Result | Note |",
                "|---|---|---:|---:|---:|---:|---|---|---|"]
        for r in data["results"]:
            if r["scenario"] != scenario:
                continue
            if r["error"]:
                err = r["error"].strip().splitlines()[-1].replace("|", "/")[:160]
                out.append(f"| {r['store']} | error | | | | | | | {err} |")
            for f in r["figures"]:
                n = f"{f['n']}" + (" trials" if f["sample_kind"] == "trials" else "")
                out.append(
                    f"| {r['store']} | {f['name']} | {_num(f['median'])} {f['unit']} | "
                    f"{_num(f['min'])} | {_num(f['max'])} | {n} | {f['target']} | "
                    f"{_met(f['met'])} | {f['note']} |")
        out.append("")
    return "\n".join(out)


def write(data: dict[str, Any], out_dir: Path, name: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    jpath, mpath = out_dir / f"{name}.json", out_dir / f"{name}.md"
    jpath.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
    mpath.write_text(to_markdown(data) + "\n")
    return jpath, mpath


def rates_are_sane(data: dict[str, Any]) -> list[str]:
    """Problems a smoke test checks for: errors, and figures that are not positive numbers."""
    bad = []
    for r in data["results"]:
        if r["error"]:
            bad.append(f"{r['store']}/{r['scenario']}: {r['error'][-300:]}")
        for f in r["figures"]:
            med = f["median"]
            if med is None or not math.isfinite(med) or med < 0 or (
                    f["unit"] in ("jobs/s", "MiB", "calls") and med <= 0):
                bad.append(f"{r['store']}/{r['scenario']}: {f['name']} = {med}")
    return bad
