"""Scenario 2, drain: N pending no-op jobs, ONE real ``tether worker`` subprocess.

Per run: a fresh isolated store, N jobs loaded with ``enqueue_many`` (chunks of 10,000), then
``python -m tether.cli.main worker bench.apps:app -c C`` is started and the harness polls until
no job is pending or running. Two rates per run:

* ``from spawn``: N / (all done - process spawn); includes interpreter start and imports;
* ``steady``: N / (all done - worker registered in the store); the queue's throughput, which
  is what the targets and the bare-loop ratio use (the bare loop has no start-up either).

On PostgreSQL the bare psycopg loop (bench.baseline) drains the same N in the same run.
"""

from __future__ import annotations

import time

from bench import baseline
from bench.apps import NOOP, make_app
from bench.common import Config, Figure, isolated, pg_schema
from bench.procs import WorkerProc, wait_drained, wait_registered

CHUNK = 10_000


def load(url: str, n: int) -> int:
    """Enqueue n no-op jobs; returns the last id."""
    app = make_app(url)
    try:
        task = app.tasks[NOOP]
        last = 0
        for start in range(0, n, CHUNK):
            ids = task.enqueue_many([((), {})] * min(CHUNK, n - start))
            last = ids[-1]
        return last
    finally:
        app.close()


def drain_once(kind: str, cfg: Config, n: int, concurrency: int) -> tuple[float, float, float]:
    """(steady jobs/s, from-spawn jobs/s, bare-loop jobs/s or 0) of one run on a fresh store."""
    with isolated(kind, cfg) as url:
        last = load(url, n)
        app = make_app(url)
        worker: WorkerProc | None = None
        try:
            worker = WorkerProc(url, concurrency, log_dir=cfg.workdir)
            registered = wait_registered(app.store, [worker])
            done = wait_drained(app.store, last, timeout=max(120.0, n / 200), worker=worker)
            steady = n / max(done - registered, 1e-9)
            spawn = n / max(done - worker.started, 1e-9)
        finally:
            if worker is not None:
                worker.stop()
            app.close()
        bare = baseline.drain_loop(pg_schema(url), n, cfg.claim_batch) if kind == "postgres" \
            else 0.0
        return steady, spawn, bare


def run(kind: str, cfg: Config) -> list[Figure]:
    figs: list[Figure] = []
    n = cfg.drain_jobs
    bare: list[float] = []
    best: Figure | None = None
    small_at_large_c: Figure | None = None
    for c in cfg.concurrencies:
        steady: list[float] = []
        spawn: list[float] = []
        for _ in range(cfg.runs):
            s, sp, b = drain_once(kind, cfg, n, c)
            steady.append(s)
            spawn.append(sp)
            if b:
                bare.append(b)
            time.sleep(0.2)
        fig = Figure(kind, "drain", f"drain {n:,} no-op jobs, -c {c}", "jobs/s", steady,
                     note="from worker registration to all done")
        figs += [fig, Figure(kind, "drain", f"drain {n:,}, -c {c}, incl. process start",
                             "jobs/s", spawn)]
        if best is None or fig.median > best.median:
            best = fig
        if c == cfg.large_concurrency:
            small_at_large_c = fig
    assert best is not None
    target = {"sqlite": 5_000.0, "redis": 4_000.0}.get(kind)
    if target is not None:
        best.expect(">=", target)
        best.note += " (best concurrency carries the target)"
    if kind == "postgres" and bare:
        ref = Figure(kind, "drain", f"bare psycopg claim/complete loop ({n:,})", "jobs/s", bare,
                     note="batch of 100, SKIP LOCKED, one unnest completion per batch")
        ratio = Figure(kind, "drain", "tether drain / bare loop", "%",
                       [100 * best.median / b for b in bare],
                       note=f"best tether drain ({best.name}) over the bare loop of each run")
        ratio.expect(">=", 60.0)
        figs += [ref, ratio]
    if cfg.drain_large:
        big = cfg.drain_large
        c = cfg.large_concurrency
        rates = [drain_once(kind, cfg, big, c)[0] for _ in range(cfg.large_runs)]
        large = Figure(kind, "drain", f"drain {big:,} no-op jobs, -c {c}", "jobs/s", rates,
                       note="from worker registration to all done")
        figs.append(large)
        if kind == "postgres" and small_at_large_c is not None:
            kept = Figure(kind, "drain", f"drain {big:,} vs {n:,} queued, -c {c}", "%",
                          [100 * r / small_at_large_c.median for r in rates])
            kept.expect(">=", 90.0)
            figs.append(kept)
    return figs
