"""Scenario 2, drain: N pending no-op jobs, ONE real ``tether worker`` subprocess.

Per run: a fresh isolated store, N jobs loaded with ``enqueue_many`` (chunks of 10,000), then
``python -m tether._cli.main worker bench.apps:app -c C`` is started and the harness polls until
no job is pending or running. Two rates per run:

* ``from spawn``: N / (all done - process spawn); includes interpreter start and imports;
* ``steady``: N / (all done - worker registered in the store); the queue's throughput, which
  is what the targets and the bare-loop ratio use (the bare loop has no start-up either).

On PostgreSQL the bare psycopg loop (bench.baseline) drains the same N in the same run; on
Redis saq (bench.saqbench, when installed) drains the same N. The defaults (``-c 10``, thread
pool) carry the targets: SQLite >= 15,000 jobs/s, PostgreSQL >= 60 % of the bare loop, Redis
>= 3x saq; with 100,000 and 1,000,000 queued, PostgreSQL keeps >= 90 % of its 10,000 rate.
"""

from __future__ import annotations

import time

from bench import baseline, saqbench
from bench.apps import NOOP, make_app
from bench.common import Config, Figure, isolated, pg_schema
from bench.procs import WorkerProc, wait_drained, wait_registered

CHUNK = 10_000
DEFAULT_C = 10  # tether worker's default concurrency: the figures that carry the targets
SQLITE_TARGET = 15_000.0


def load(url: str, n: int) -> int:
    """Enqueue n no-op jobs; returns the last id."""
    app = make_app(url)
    try:
        task = app.runtime.registry.tasks[NOOP]
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
    """The defaults first (``-c 10``, thread pool: what users run), each against its reference
    measured in the same run (PostgreSQL: the bare loop; Redis: saq); then the other
    concurrencies; then the 100k and 1M drains at the defaults as % of the 10k rate."""
    figs: list[Figure] = []
    n = cfg.drain_jobs
    default: Figure | None = None
    for c in cfg.concurrencies:
        steady: list[float] = []
        spawn: list[float] = []
        bare: list[float] = []
        for _ in range(cfg.runs):
            s, sp, b = drain_once(kind, cfg, n, c)
            steady.append(s)
            spawn.append(sp)
            if b:
                bare.append(b)
            time.sleep(0.2)
        label = f"-c {c}" + (", thread pool (the defaults)" if c == DEFAULT_C else "")
        fig = Figure(kind, "drain", f"drain {n:,} no-op jobs, {label}", "jobs/s", steady,
                     note="from worker registration to all done")
        figs += [fig, Figure(kind, "drain", f"drain {n:,}, -c {c}, incl. process start",
                             "jobs/s", spawn)]
        if c == DEFAULT_C:
            default = fig
            figs += _references(kind, cfg, fig, bare)
        elif bare:
            figs.append(Figure(kind, "drain", f"drain at -c {c} / bare loop (same runs)", "%",
                               [100 * t / b for t, b in zip(steady, bare, strict=True)]))
    for size in (cfg.drain_medium, cfg.drain_large):
        if not size:
            continue
        rates = [drain_once(kind, cfg, size, DEFAULT_C)[0] for _ in range(cfg.large_runs)]
        figs.append(Figure(kind, "drain", f"drain {size:,} no-op jobs, -c {DEFAULT_C}",
                           "jobs/s", rates, note="from worker registration to all done"))
        if default is not None:
            kept = Figure(kind, "drain", f"drain {size:,} vs {n:,} queued, -c {DEFAULT_C}", "%",
                          [100 * r / default.median for r in rates],
                          note=f"over the median {n:,} rate at -c {DEFAULT_C}")
            if kind == "postgres":
                kept.expect(">=", 90.0)
            figs.append(kept)
    return figs


def _references(kind: str, cfg: Config, fig: Figure, bare: list[float]) -> list[Figure]:
    """The default-settings figure's target, and what it is measured against."""
    if kind == "sqlite":
        fig.expect(">=", SQLITE_TARGET)
        return []
    if kind == "postgres" and bare:
        ref = Figure(kind, "drain", f"bare psycopg claim/complete loop ({cfg.drain_jobs:,})",
                     "jobs/s", bare,
                     note="batch of 100, SKIP LOCKED, one unnest completion per batch")
        ratio = Figure(kind, "drain", "tether drain / bare loop (defaults)", "%",
                       [100 * t / b for t, b in zip(fig.samples, bare, strict=True)],
                       note="each run's tether rate at -c 10 over the bare loop run after it")
        ratio.expect(">=", 60.0)
        return [ref, ratio]
    if kind == "redis":
        if not saqbench.available():
            fig.note += "; no saq comparison (pip install saq into the bench venv)"
            return []
        # saq's default concurrency is 10, tether's default too: one measurement is both.
        rates = [saqbench.drain_once(cfg.drain_jobs, None, cfg.workdir) for _ in range(cfg.runs)]
        ref = Figure(kind, "drain", f"saq drain {cfg.drain_jobs:,} no-op jobs, its defaults "
                     f"(concurrency {saqbench.default_concurrency()})", "jobs/s", rates,
                     note="one saq worker process, same Redis")
        ratio = Figure(kind, "drain", "tether drain / saq (both at their defaults)", "x",
                       [fig.median / r for r in rates],
                       note="tether at -c 10 over each saq run")
        ratio.expect(">=", 3.0)
        return [ref, ratio]
    return []
