"""``python -m bench.flow``: what flow limits cost a drain (issue #19).

    python -m bench.flow [--stores sqlite,postgres,redis] [--runs 3] [--jobs 10000]
                         [--keys 100] [--per-key 2] [--main ../tether-main/src] [--out FILE]

Per run and store, in this order (the modes interleave, so machine load drifts over all alike):

* ``main``: no limit declared, worker and harness on the code at ``--main`` (a checkout's
  ``src``, put first on ``PYTHONPATH``): today's speed before flow control; skipped without
  ``--main``;
* ``none``: no limit declared, this branch's code: must equal ``main`` within noise;
* ``key``: the same jobs under ``concurrency=--per-key`` per ``limit_key`` over ``--keys``
  keys: target >= 70 % of ``none``.
* PostgreSQL only: the bare psycopg claim/complete loop (bench.baseline) over the same N, the
  reference of the drain scenario.

Each measurement is one child process (``python -m bench.flow --once MODE``), so ``main``
runs entirely on main's code, schema included. A drain is the drain scenario's protocol: N jobs
loaded with ``enqueue_many``, one real ``tether worker`` at its defaults (``-c 10``, thread
pool), rate from worker registration to all done, and the worker process's CPU time (user +
system, from ``/proc``) over the same span per job: on a machine others load, the CPU a job
costs moves less than the rate. A store whose claim raises
``NotImplementedError`` for flow limits (PostgreSQL until its support lands) gets its ``key``
figure skipped with a message. Only loopback servers and isolated stores (bench.common).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, STORES, Config, fmt, isolated, pg_schema

CHUNK = 10_000
TARGET = 70.0  # % of the no-limit drain, issue #19
MODES = ("main", "none", "key")


def _load(url: str, n: int, keys: int, mode: str) -> int:
    """Enqueue n jobs, key = i mod keys; returns the last id."""
    from bench.flowapp import TASK, make_app

    app = make_app(url, mode)
    try:
        task = app.runtime.registry.tasks[TASK]
        last = 0
        for start in range(0, n, CHUNK):
            ids = task.enqueue_many([((i % keys,), {})
                                     for i in range(start, min(start + CHUNK, n))])
            last = ids[-1]
        return last
    finally:
        app.close()


def _flow_supported(store: object) -> bool:
    """False when the store's claim raises NotImplementedError for flow limits."""
    from tether.stores._records import FlowLimit

    probe = FlowLimit("task", "bench.flow.probe", concurrency=1, per_key=True)
    try:
        store.claim("bench-probe", ["bench-probe"], 1, 30.0, flow=[probe])  # type: ignore[attr-defined]
    except NotImplementedError:
        return False
    return True


def once(kind: str, mode: str, n: int, keys: int, per_key: int) -> dict[str, object]:
    """One drain on a fresh store: {"rate": jobs/s} or {"skipped": why}."""
    from bench.flowapp import make_app
    from bench.procs import WorkerProc, wait_drained, wait_registered

    os.environ["BENCH_FLOW"] = "none" if mode == "main" else mode
    os.environ["BENCH_FLOW_PER_KEY"] = str(per_key)
    with tempfile.TemporaryDirectory(prefix="tflow-") as workdir, \
            isolated(kind, Config(workdir=workdir)) as url:
        app = make_app(url, os.environ["BENCH_FLOW"])
        try:
            if mode == "key" and not _flow_supported(app.store):
                return {"skipped": f"{kind}: the store raises NotImplementedError for flow "
                                   "limits (not implemented on this branch yet)"}
            last = _load(url, n, keys, os.environ["BENCH_FLOW"])
            worker = WorkerProc(url, 10, log_dir=workdir,
                                module=["-m", "tether._cli.main", "--log-level", "WARNING",
                                        "worker", "bench.flowapp:app", "-c", "10"])
            try:
                registered = wait_registered(app.store, [worker])
                cpu = worker.cpu_seconds()
                done = wait_drained(app.store, last, timeout=max(120.0, n / 100),
                                    worker=worker)
                cpu = worker.cpu_seconds() - cpu
            finally:
                worker.stop()
            return {"rate": n / max(done - registered, 1e-9), "cpu_us": 1e6 * cpu / n}
        finally:
            app.close()


def _bare(n: int) -> float:
    from bench import baseline

    with tempfile.TemporaryDirectory(prefix="tflow-") as workdir, \
            isolated("postgres", Config(workdir=workdir)) as url:
        return baseline.drain_loop(pg_schema(url), n, 100)


def _child(kind: str, mode: str, args: argparse.Namespace) -> dict[str, object]:
    env = dict(os.environ)
    path = [str(ROOT)]
    if mode == "main":
        path.insert(0, args.main)
    env["PYTHONPATH"] = os.pathsep.join(path)
    out = subprocess.run(
        [sys.executable, "-m", "bench.flow", "--once", mode, "--stores", kind,
         "--jobs", str(args.jobs), "--keys", str(args.keys), "--per-key", str(args.per_key)],
        cwd=str(ROOT), env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"error": out.stderr[-1500:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.flow", description=__doc__.splitlines()[0]
                                if __doc__ else None)
    p.add_argument("--stores", default=",".join(STORES))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--keys", type=int, default=100)
    p.add_argument("--per-key", type=int, default=2)
    p.add_argument("--main", default="", help="src dir of the code to compare (e.g. main's)")
    p.add_argument("--out", default="", help="also write the results as JSON here")
    p.add_argument("--once", choices=MODES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    stores = [s for s in args.stores.split(",") if s]
    if args.once:
        print(json.dumps(once(stores[0], args.once, args.jobs, args.keys, args.per_key)))
        return 0
    modes = [m for m in MODES if m != "main" or args.main]
    results: dict[str, dict[str, list[float]]] = {s: {m: [] for m in (*modes, "bare")}
                                                  for s in stores}
    cpus: dict[str, dict[str, list[float]]] = {s: {m: [] for m in modes} for s in stores}
    notes: list[str] = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for run in range(args.runs):
        for kind in stores:
            for mode in modes:
                got = _child(kind, mode, args)
                if "rate" in got:
                    results[kind][mode].append(float(got["rate"]))  # type: ignore[arg-type]
                    cpus[kind][mode].append(float(got["cpu_us"]))  # type: ignore[arg-type]
                else:
                    msg = str(got.get("skipped") or got.get("error"))
                    if msg not in notes:
                        notes.append(msg)
                print(f"run {run + 1} {kind} {mode}: {got}", file=sys.stderr, flush=True)
            if kind == "postgres":
                results[kind]["bare"].append(_bare(args.jobs))
    load = os.getloadavg()
    print(f"flow drain, {args.jobs:,} jobs, {args.keys} keys, concurrency={args.per_key} per "
          f"key, one worker -c 10; {args.runs} interleaved runs, started {started}, load "
          f"{load[0]:.1f}")
    print("| store | mode | median jobs/s | min | max | vs none | worker CPU/job |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for kind in stores:
        base = results[kind]["none"]
        for mode in (*modes, "bare"):
            rates = results[kind][mode]
            if not rates:
                continue
            med = statistics.median(rates)
            ratio = (f"{100 * med / statistics.median(base):.0f} %" if base else "n/a")
            cpu = cpus[kind].get(mode) or []
            per_job = f"{statistics.median(cpu):.0f} us" if cpu else "n/a"
            print(f"| {kind} | {mode} | {fmt(med)} | {fmt(min(rates))} | {fmt(max(rates))} "
                  f"| {ratio} | {per_job} |")
    for note in notes:
        print(f"note: {note}")
    if args.out:
        Path(args.out).write_text(json.dumps({"started": started, "results": results,
                                              "cpu_us": cpus, "notes": notes,
                                              "args": vars(args)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
