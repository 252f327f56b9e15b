"""``python -m bench run``: every scenario on every store, written to bench/results/.

    python -m bench run [--quick] [--stores sqlite,postgres,redis]
                        [--scenarios drain,enqueue,startup,latency,recovery,heartbeat,reap,...]
                        [--runs 3] [--drain-large 1000000] [--reap-history 1000000] ...
    python -m bench render bench/results/latest.json   # re-write the Markdown from the JSON

The drains come first, at tether's defaults (``-c 10``, thread pool) before any other
concurrency, each beside its reference measured in the same run (the bare psycopg loop; saq
on Redis when installed). The default is the full run (10,000-job drains plus 100,000- and
1,000,000-job drains, a 1,000,000-job
history for the reap scenario); ``--quick`` uses small sizes for a check in a few minutes.
Only loopback servers are used, each run in its own PostgreSQL schema / Redis key prefix /
SQLite file, removed afterwards. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shlex
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from bench import env, report
from bench.common import STORES, Config, Outcome
from bench.scenarios import ORDER, registry

DEFAULT_OUT = Path(__file__).resolve().parent / "results"


def _csv(text: str, allowed: Sequence[str], what: str) -> tuple[str, ...]:
    items = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = [x for x in items if x not in allowed]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(allowed)})")
    return items


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0]
                                     if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run the scenarios and write the report")
    p.add_argument("--quick", action="store_true", help="small sizes (a few minutes)")
    p.add_argument("--preset", choices=["full", "quick", "smoke"], default=None,
                   help="size preset (--quick is --preset quick)")
    p.add_argument("--stores", default=",".join(STORES))
    p.add_argument("--scenarios", default=",".join(ORDER))
    p.add_argument("--runs", type=int, help="runs per figure (>= 3 for a report)")
    p.add_argument("--enqueue-jobs", type=int, help="jobs enqueued one by one")
    p.add_argument("--enqueue-many-jobs", type=int, help="jobs in the one enqueue_many call")
    p.add_argument("--drain-jobs", type=int)
    p.add_argument("--drain-medium", type=int, help="size of the 100k drain; 0 skips it")
    p.add_argument("--drain-large", type=int, help="size of the large drain; 0 skips it")
    p.add_argument("--large-runs", type=int, help="runs of the large drain")
    p.add_argument("--concurrency", type=_ints, dest="concurrencies",
                   help="worker -c values for the drain, e.g. 10,50")
    p.add_argument("--latency-jobs", type=int)
    p.add_argument("--recovery-trials", type=int)
    p.add_argument("--recovery-lease-ttl", type=float)
    p.add_argument("--hb-inflight", type=_ints, help="in-flight sizes, e.g. 10,1000")
    p.add_argument("--reap-history", type=int)
    p.add_argument("--reap-expired", type=int)
    p.add_argument("--memory-jobs", type=int)
    p.add_argument("--pool-jobs", type=int, help="no-op jobs per pool drain")
    p.add_argument("--pool-concurrency", type=_ints, dest="pool_concurrencies",
                   help="-c values for the pool drains, e.g. 2,10")
    p.add_argument("--pool-trials", type=int, help="stop trials per trigger")
    p.add_argument("--pool-cpu-jobs", type=int, help="jobs in the CPU-bound batch")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    p.add_argument("--name", default="latest", help="file name stem (NAME.json, NAME.md)")
    r = sub.add_parser("render", help="re-write the Markdown report from a JSON report")
    r.add_argument("json", type=Path)
    return parser


def make_config(args: argparse.Namespace) -> Config:
    cfg = Config.preset_named(args.preset or ("quick" if args.quick else "full"))
    overrides = {
        k: getattr(args, k)
        for k in ("runs", "enqueue_jobs", "enqueue_many_jobs", "drain_jobs", "drain_medium",
                  "drain_large",
                  "large_runs",
                  "concurrencies", "latency_jobs", "recovery_trials", "recovery_lease_ttl",
                  "hb_inflight", "reap_history", "reap_expired", "memory_jobs", "pool_jobs",
                  "pool_concurrencies", "pool_trials", "pool_cpu_jobs")
        if getattr(args, k) is not None
    }
    if overrides:
        overrides["preset"] = f"{cfg.preset} + overrides ({', '.join(sorted(overrides))})"
    return replace(cfg, **overrides)


def reachable(kind: str) -> bool:
    if kind == "sqlite":
        return True
    port = {"postgres": 5432, "redis": 6379}[kind]
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def run_all(cfg: Config, stores: Sequence[str], scenarios: Sequence[str], out: Path,
            name: str, command: str) -> dict[str, object]:
    header = {**env.describe(), "settings": cfg.as_dict(), "command": command,
              "stores": list(stores), "scenarios": list(scenarios)}
    outcomes: list[Outcome] = []
    table = registry()
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as workdir:
        cfg = replace(cfg, workdir=workdir)
        for scenario in scenarios:
            for kind in stores:
                outcome = Outcome(kind, scenario)
                t0 = time.monotonic()
                print(f"[bench] {scenario} on {kind} ...", file=sys.stderr, flush=True)
                if not reachable(kind):
                    outcome.error = f"{kind} is not reachable on 127.0.0.1"
                else:
                    try:
                        outcome.figures = table[scenario](kind, cfg)
                    except Exception:
                        outcome.error = traceback.format_exc()
                        print(outcome.error, file=sys.stderr)
                outcome.seconds = time.monotonic() - t0
                for f in outcome.figures:
                    print(f"[bench]   {kind}: {f.name}: {f.median:.4g} {f.unit} "
                          f"(min {f.min:.4g}, max {f.max:.4g}) {f.target} "
                          f"{'' if f.met is None else ('met' if f.met else 'MISSED')}",
                          file=sys.stderr, flush=True)
                outcomes.append(outcome)
                report.write(report.to_json(header, outcomes), out, name)  # keep partials
    data = report.to_json(header, outcomes)
    report.write(data, out, name)
    return data


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "render":
        data = json.loads(args.json.read_text())
        md = args.json.with_suffix(".md")
        md.write_text(report.to_markdown(data) + "\n")
        print(md)
        return 0
    cfg = make_config(args)
    if cfg.runs < 3 and cfg.preset == "full":
        print("[bench] note: fewer than 3 runs per figure", file=sys.stderr)
    stores = _csv(args.stores, STORES, "store")
    scenarios = _csv(args.scenarios, ORDER, "scenario")
    command = "python -m bench " + shlex.join(list(argv) if argv is not None else sys.argv[1:])
    data = run_all(cfg, stores, scenarios, args.out, args.name, command)
    print(f"[bench] wrote {args.out / (args.name + '.json')} and {args.name}.md",
          file=sys.stderr)
    failed = [r for r in data["results"] if r["error"]]  # type: ignore[attr-defined]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
