"""A/B drains for speed work (issue #23): another checkout against this one, interleaved.

``python -m bench.speed --base /path/to/other/checkout [--tree /path/to/checkout]
[--stores sqlite,postgres,redis] [--runs 3] [--jobs 10000] [-c 10] [--pool thread|process]
[--out FILE.json]``

``--tree`` defaults to this checkout; with it, any checkout's tether can be compared with any
other's from the one tree that has this tool (its bench/ drives both).

Per round and store: the base tree's drain, the other tree's drain (the order alternating from
round to round) and the bare loop of the same protocol (bench.bare), each on a fresh isolated
store. A drain is N queued no-op jobs and one ``tether worker bench.apps:app -c 10`` (thread
pool unless ``--pool process``); the rate is N / (all done - worker registered), the CPU per
job is the worker's process tree's utime + stime (from /proc, children included) over the same
window, divided by N.
Each tree's drive runs in a subprocess with that tree's ``src`` first on ``PYTHONPATH``, so the
worker and the enqueues run that tree's tether (the harness pieces are this tree's bench/, as
bench.liveness does). Prints the medians: rate, CPU/job, ratio to the bare loop (per round),
and this / base. Wall rates are noisy on a loaded machine: read the CPU per job first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import bare
from bench.common import ROOT, STORES, Config, isolated

#: Run with a tree's src on PYTHONPATH (then this tree's root): load N jobs, start one worker,
#: print the steady rate and the worker tree's CPU per job as JSON.
DRIVE = r'''
import json, sys, tempfile
import tether
from bench.apps import make_app, NOOP
from bench.procs import WorkerProc, wait_drained, wait_registered, tree_cpu_seconds

url, n, c, pool = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
app = make_app(url)
app.store.migrate()
task = app.runtime.registry.tasks[NOOP]
last = 0
for start in range(0, n, 10_000):
    last = task.enqueue_many([((), {})] * min(10_000, n - start))[-1]
worker = WorkerProc(url, c, log_dir=tempfile.mkdtemp(prefix="tbench-speed-"),
                    extra_args=["--pool", pool])
try:
    registered = wait_registered(app.store, [worker], timeout=120)
    cpu0 = tree_cpu_seconds(worker.pid)
    done = wait_drained(app.store, last, timeout=max(300, n / 100), worker=worker)
    cpu1 = tree_cpu_seconds(worker.pid)
finally:
    worker.stop()
    app.close()
print(json.dumps({"rate": n / max(done - registered, 1e-9), "cpu_per_job": (cpu1 - cpu0) / n,
                  "tether": tether.__file__}))
'''


def drive(tree: Path, kind: str, n: int, concurrency: int,
          pool: str = "thread") -> dict[str, float]:
    """One drain by ``tree``'s tether on a fresh isolated store: rate and CPU per job."""
    env = dict(os.environ, PYTHONPATH=f"{tree / 'src'}{os.pathsep}{ROOT}")
    with isolated(kind, Config()) as url:
        done = subprocess.run([sys.executable, "-c", DRIVE, url, str(n), str(concurrency), pool],
                              cwd=str(ROOT), env=env, capture_output=True, text=True,
                              timeout=max(900.0, n / 50), check=False)
    if done.returncode != 0:
        raise RuntimeError(f"drive failed on {tree} {kind}:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    expected = str(tree / "src")
    if not str(out.pop("tether")).startswith(expected):
        raise RuntimeError(f"the drive did not import tether from {expected}")
    return {k: float(v) for k, v in out.items()}


def bare_drain(kind: str, n: int) -> dict[str, float]:
    with isolated(kind, Config()) as url:
        r = bare.run(kind, url, n)
    return {"rate": r.rate, "cpu_per_job": r.cpu_per_job}


def measure(trees: dict[str, Path], stores: list[str], runs: int, n: int,
            concurrency: int, pool: str = "thread",
            echo: bool = True) -> dict[str, dict[str, list[dict[str, float]]]]:
    """samples[store][name] = one dict per round (name: the trees' names and "bare")."""
    samples: dict[str, dict[str, list[dict[str, float]]]] = {}
    names = list(trees)
    for rnd in range(runs):
        order = names if rnd % 2 == 0 else names[::-1]
        for kind in stores:
            per = samples.setdefault(kind, {})
            for name in [*order, "bare"]:
                s = bare_drain(kind, n) if name == "bare" else \
                    drive(trees[name], kind, n, concurrency, pool)
                per.setdefault(name, []).append(s)
                if echo:
                    print(f"round {rnd} {kind} {name}: {s['rate']:,.0f} jobs/s, "
                          f"{s['cpu_per_job'] * 1e6:.1f} us CPU/job", flush=True)
    return samples


def table(samples: dict[str, dict[str, list[dict[str, float]]]], names: list[str]) -> str:
    """Medians per store and tree; the bare ratio is the median of each round's ratio."""
    lines = ["| store | tree | jobs/s | CPU/job (us) | / bare loop (rate) | CPU / bare |",
             "|---|---|---:|---:|---:|---:|"]
    for kind, per in samples.items():
        bares = per["bare"]
        for name in [*names, "bare"]:
            rows = per[name]
            rate = statistics.median(r["rate"] for r in rows)
            cpu = statistics.median(r["cpu_per_job"] for r in rows)
            ratio = statistics.median(r["rate"] / b["rate"] for r, b in zip(rows, bares,
                                                                           strict=True))
            cpu_x = statistics.median(r["cpu_per_job"] / max(b["cpu_per_job"], 1e-9)
                                      for r, b in zip(rows, bares, strict=True))
            lines.append(f"| {kind} | {name} | {rate:,.0f} | {cpu * 1e6:.1f} | {ratio:.2f} | "
                         f"{cpu_x:.1f}x |")
        if len(names) == 2:
            a, b = names
            r = statistics.median(x["rate"] / y["rate"] for x, y in zip(per[b], per[a],
                                                                        strict=True))
            c = statistics.median(x["cpu_per_job"] / y["cpu_per_job"]
                                  for x, y in zip(per[b], per[a], strict=True))
            lines.append(f"| {kind} | {b} / {a} | {r:.2f}x | {c:.2f}x | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.speed", description=__doc__)
    parser.add_argument("--base", required=True, type=Path, help="another checkout to compare")
    parser.add_argument("--tree", type=Path, default=ROOT,
                        help="the checkout measured against --base (default: this one)")
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("-c", "--concurrency", type=int, default=10)
    parser.add_argument("--pool", choices=["thread", "process"], default="thread")
    parser.add_argument("--out", type=Path, help="also write the samples as JSON here")
    args = parser.parse_args(argv)
    stores = [s for s in args.stores.split(",") if s]
    trees = {"base": args.base.resolve(), "this": args.tree.resolve()}
    load0 = os.getloadavg()
    samples = measure(trees, stores, args.runs, args.jobs, args.concurrency, args.pool)
    load1 = os.getloadavg()
    print(f"\n{args.jobs:,} jobs, -c {args.concurrency} --pool {args.pool}, {args.runs} "
          "interleaved rounds; "
          f"load average {load0[0]:.2f} at start, {load1[0]:.2f} at end")
    print(table(samples, list(trees)))
    if args.out:
        args.out.write_text(json.dumps({
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "jobs": args.jobs,
            "runs": args.runs, "concurrency": args.concurrency, "pool": args.pool,
            "load": [load0, load1], "samples": samples,
            "trees": {k: str(v) for k, v in trees.items()}}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
