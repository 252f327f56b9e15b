"""``python -m bench.workflows``: what workflows cost (issue #20).

    python -m bench.workflows [--stores sqlite,postgres,redis] [--runs 3]
                              [--fanout 10000] [--chain 1000] [--out FILE]

Per run and store, on a fresh isolated store each (bench.common; loopback servers only):

* **fan-out**: one parent, then ``--fanout`` children after it in one ``enqueue_many(...,
  after=[parent])`` (the enqueue: jobs/s). The parent is claimed and finished ``done`` by a
  direct store call: that one ``finish`` is the write that releases every child (ms; beside
  it the median ``finish`` of a job without children, 20 of them, the common case), while one
  real ``tether worker -c 10`` waits idle for jobs of the children's queue: the time from
  the release to the first child's start (pick-up: how soon an idle worker learns of
  released jobs) and the drain rate from the release (jobs/s).
* **chain**: ``tether.chain`` of ``--chain`` steps (``x + 1`` from 0) enqueued (one round
  trip a step: ms per step), then run by one real ``tether worker -c 10``: from registration
  to the last step done, in ms per step (a step's finish releases the next, which some
  worker must claim: the hand-off). The last result must be ``--chain``.

Each run is one child process (``python -m bench.workflows --once STORE``), so runs do not
share connections or caches.
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
from typing import Any

from bench.common import ROOT, STORES, Config, fmt, isolated

PLAIN_FINISHES = 20


def _worker(url: str, workdir: str) -> Any:
    from bench.procs import WorkerProc

    return WorkerProc(url, 10, log_dir=workdir, module=[
        "-m", "tether._cli.main", "--log-level", "WARNING", "worker", "bench.wfapp:app",
        "-c", "10"])


def _wait(pred: Any, timeout: float, worker: Any, what: str) -> float:
    deadline = time.monotonic() + timeout
    while not pred():
        if not worker.alive():
            raise RuntimeError(f"worker died: {worker.log_tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout:.0f}s")
        time.sleep(0.005)
    return time.time()


def fanout(kind: str, n: int) -> dict[str, float]:
    from bench.procs import wait_registered
    from bench.wfapp import make_app
    from tether.stores import Outcome

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="twf-") as workdir, \
            isolated(kind, Config(workdir=workdir)) as url:
        app = make_app(url)
        store = app.store
        try:
            leaf = app.runtime.registry.tasks["bench.wf.leaf"]
            plain: list[float] = []
            for _ in range(PLAIN_FINISHES):  # the common case: a job without children
                leaf.enqueue_with(queue="plain")
                (job,) = store.claim("bench", ["plain"], 1, 30.0)
                t = time.perf_counter()
                store.finish([Outcome(job.lease, "done", result="null")])
                plain.append(time.perf_counter() - t)
            out["plain_finish_ms"] = 1000 * statistics.median(plain)
            parent = leaf.enqueue_with(queue="parent")
            t = time.perf_counter()
            children = leaf.enqueue_many([((), {})] * n, after=[parent])
            out["enqueue_rate"] = n / (time.perf_counter() - t)
            worker = _worker(url, workdir)  # serves "default", the children's queue
            try:
                wait_registered(store, [worker])
                time.sleep(1.0)  # let it go idle, waiting on the store for jobs
                (job,) = store.claim("bench", ["parent"], 1, 30.0)
                t = time.perf_counter()
                store.finish([Outcome(job.lease, "done", result="null")])
                released = time.time()
                out["release_ms"] = 1000 * (time.perf_counter() - t)
                first = children[0]
                _wait(lambda: (j := store.get_job(first)) is not None
                      and j.started_at is not None, 120, worker, "the first child")
                started = store.get_job(first)
                assert started is not None and started.started_at is not None
                out["pickup_ms"] = 1000 * max(0.0, started.started_at - released)
                done = _wait(lambda: all(
                    c.count == 0 for c in store.counts()
                    if c.status in ("pending", "running", "waiting")), max(120.0, n / 50),
                    worker, "the children's drain")
                out["drain_rate"] = n / max(done - released, 1e-9)
            finally:
                worker.stop()
        finally:
            app.close()
    return out


def chain(kind: str, n: int) -> dict[str, float]:
    import tether
    from bench.procs import wait_registered
    from bench.wfapp import make_app

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="twf-") as workdir, \
            isolated(kind, Config(workdir=workdir)) as url:
        app = make_app(url)
        store = app.store
        try:
            step = app.runtime.registry.tasks["bench.wf.step"]
            t = time.perf_counter()
            run = tether.chain(step.s(0), *(step.s() for _ in range(n - 1))).enqueue()
            out["enqueue_ms_per_step"] = 1000 * (time.perf_counter() - t) / n
            worker = _worker(url, workdir)
            try:
                registered = wait_registered(store, [worker])
                done = _wait(lambda: (j := store.get_job(run.last)) is not None
                             and j.status in ("done", "failed", "cancelled"),
                             max(300.0, n * 2.0), worker, "the chain's last step")
                out["run_ms_per_step"] = 1000 * (done - registered) / n
            finally:
                worker.stop()
            result = app.wait(run.last, timeout=10)
            assert result == n, f"the chain ended at {result}, expected {n}"
        finally:
            app.close()
    return out


def once(kind: str, args: argparse.Namespace) -> dict[str, float]:
    return {**fanout(kind, args.fanout), **chain(kind, args.chain)}


FIGURES = (("enqueue_rate", "fan-out enqueue (jobs/s)"),
           ("release_ms", "release write (ms)"),
           ("plain_finish_ms", "finish, no children (ms)"),
           ("pickup_ms", "first child started, idle worker (ms after the release)"),
           ("drain_rate", "children drained (jobs/s)"),
           ("enqueue_ms_per_step", "chain enqueue (ms/step)"),
           ("run_ms_per_step", "chain run (ms/step)"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.workflows",
                                description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--stores", default=",".join(STORES))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--fanout", type=int, default=10_000)
    p.add_argument("--chain", type=int, default=1_000)
    p.add_argument("--out", default="", help="also write the results as JSON here")
    p.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    stores = [s for s in args.stores.split(",") if s]
    if args.once:
        print(json.dumps(once(stores[0], args)))
        return 0
    results: dict[str, dict[str, list[float]]] = {s: {k: [] for k, _ in FIGURES}
                                                  for s in stores}
    errors: list[str] = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load0 = os.getloadavg()[0]
    for run in range(args.runs):
        for kind in stores:
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            proc = subprocess.run(
                [sys.executable, "-m", "bench.workflows", "--once", "--stores", kind,
                 "--fanout", str(args.fanout), "--chain", str(args.chain)],
                cwd=str(ROOT), env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                errors.append(f"{kind} run {run + 1}: {proc.stderr[-1500:]}")
                print(errors[-1], file=sys.stderr, flush=True)
                continue
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            for key, value in got.items():
                results[kind][key].append(float(value))
            print(f"run {run + 1} {kind}: {got}", file=sys.stderr, flush=True)
    print(f"workflows: fan-out of {args.fanout:,}, chain of {args.chain:,}; {args.runs} runs, "
          f"started {started}, load {load0:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    print(f"| figure | {' | '.join(stores)} |")
    print(f"|---|{'---:|' * len(stores)}")
    for key, title in FIGURES:
        cells = []
        for kind in stores:
            values = results[kind][key]
            cells.append(f"{fmt(statistics.median(values))} ({fmt(min(values))}–"
                         f"{fmt(max(values))})" if values else "n/a")
        print(f"| {title} | {' | '.join(cells)} |")
    for error in errors:
        print(f"error: {error.splitlines()[-1] if error.splitlines() else error}")
    if args.out:
        Path(args.out).write_text(json.dumps({"started": started, "results": results,
                                              "errors": errors, "args": vars(args)}, indent=1))
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
