"""Scenario 3, pick-up latency: an idle worker, one job enqueued every ``latency_gap`` seconds.

Latency of a job = the handler's ``time.time()`` at entry minus the enqueuer's ``time.time()``
just before ``enqueue`` (passed as the job's argument; same machine, same clock). Per run the
p50 and p99 over all jobs; the figures are the median (min, max) of those over the runs.
"""

from __future__ import annotations

import os
import time

from bench.apps import RECORD, make_app
from bench.common import Config, Figure, isolated, percentile
from bench.procs import RecordFile, WorkerProc, wait_registered


def latency_once(kind: str, cfg: Config) -> list[float]:
    """Pick-up latencies (seconds) of one run."""
    with isolated(kind, cfg) as url:
        record = os.path.join(cfg.workdir, f"latency-{time.time_ns()}.rec")
        records = RecordFile(record)
        app = make_app(url)
        worker: WorkerProc | None = None
        try:
            app.store.migrate()
            worker = WorkerProc(url, cfg.latency_concurrency, log_dir=cfg.workdir,
                                record=record)
            wait_registered(app.store, [worker])
            time.sleep(0.5)  # let it settle into its idle wait
            task = app.runtime.registry.tasks[RECORD]
            task.enqueue(0.0)  # warm the producer connection; not measured
            records.wait_for(lambda r: True, 30.0)
            records.records.clear()
            t0 = time.time()
            for i in range(cfg.latency_jobs):
                pause = t0 + i * cfg.latency_gap - time.time()
                if pause > 0:
                    time.sleep(pause)
                task.enqueue(time.time())
            deadline = time.monotonic() + 30.0
            while len(records.records) < cfg.latency_jobs and time.monotonic() < deadline:
                time.sleep(0.01)
                records.poll()
            if len(records.records) < cfg.latency_jobs:
                raise RuntimeError(f"only {len(records.records)} of {cfg.latency_jobs} started")
            return [r.started - r.sent for r in records.records]
        finally:
            if worker is not None:
                worker.stop()
            app.close()
            os.unlink(record)


def run(kind: str, cfg: Config) -> list[Figure]:
    p50: list[float] = []
    p99: list[float] = []
    worst: list[float] = []
    for _ in range(cfg.runs):
        lat = latency_once(kind, cfg)
        p50.append(1000 * percentile(lat, 50))
        p99.append(1000 * percentile(lat, 99))
        worst.append(1000 * max(lat))
    shape = f"{cfg.latency_jobs} jobs, one per {cfg.latency_gap * 1000:.0f} ms"
    figs = [
        Figure(kind, "latency", f"pick-up p50 ({shape})", "ms", p50),
        Figure(kind, "latency", f"pick-up p99 ({shape})", "ms", p99),
        Figure(kind, "latency", "pick-up max", "ms", worst),
    ]
    if kind in ("postgres", "redis"):
        figs[1].expect("<", 50.0)
    return figs
