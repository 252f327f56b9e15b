"""Scenario 4, recovery: a worker SIGKILLed mid-job; how long until the job runs again.

Two real workers (``-c 2``) with a short ``lease_ttl``. Each trial enqueues ``bench.crash_once``
(its first attempt records its start and hangs), waits for that start record, sleeps a random
part of a heartbeat interval (so kills land at every phase of the lease), SIGKILLs the worker
running it, and waits for the record of attempt 2, which only the other worker can write.
Recovery = that handler start - the kill. The killed worker is replaced before the next trial,
so whichever of the two was the maintenance leader may die too (the election then moves).

The samples of these figures are the trials (not runs): p50, p99 and max over all trials.
Documented bound: ``lease_ttl + stall_grace + 2 s``; target: p99 <= lease_ttl + 1 s.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable

from bench.apps import CRASH_ONCE, make_app
from bench.common import Config, Figure, isolated, percentile
from bench.procs import RecordFile, StartRecord, WorkerProc, wait_registered


def first_attempt(job_id: int) -> Callable[[StartRecord], bool]:
    return lambda r: r.job_id == job_id and r.attempt == 1


def later_attempt(job_id: int) -> Callable[[StartRecord], bool]:
    return lambda r: r.job_id == job_id and r.attempt >= 2


def trials(kind: str, cfg: Config) -> tuple[list[float], float, float]:
    """(recovery seconds per trial, lease_ttl, documented bound)."""
    ttl = cfg.recovery_lease_ttl
    out: list[float] = []
    with isolated(kind, cfg) as url:
        record = os.path.join(cfg.workdir, f"recovery-{time.time_ns()}.rec")
        records = RecordFile(record)
        app = make_app(url, lease_ttl=ttl)
        settings = app.runtime.settings
        bound = settings.recovery_bound
        workers: list[WorkerProc] = []

        def spawn() -> WorkerProc:
            w = WorkerProc(url, 2, log_dir=cfg.workdir, lease_ttl=ttl, record=record)
            workers.append(w)
            return w

        try:
            app.store.migrate()
            wait_registered(app.store, [spawn(), spawn()])
            task = app.runtime.registry.tasks[CRASH_ONCE]
            for _ in range(cfg.recovery_trials):
                job_id = task.enqueue(time.time())
                first = records.wait_for(first_attempt(job_id), 30.0)
                time.sleep(random.uniform(0.0, settings.heartbeat_every))
                victim = next(w for w in workers if w.pid == first.pid)
                killed_at = time.time()
                victim.kill()
                workers.remove(victim)
                try:
                    again = records.wait_for(later_attempt(job_id), bound + 15.0)
                    out.append(again.started - killed_at)
                except TimeoutError:
                    out.append(math.inf)
                wait_registered(app.store, [spawn()])
        finally:
            for w in workers:
                w.stop(timeout=5.0)
            app.close()
            os.unlink(record)
    return out, ttl, bound


def run(kind: str, cfg: Config) -> list[Figure]:
    rec, ttl, bound = trials(kind, cfg)
    ms = [1000 * r for r in rec]
    tr = "trials"
    p50 = Figure(kind, "recovery", f"recovery p50 ({len(ms)} SIGKILLs)", "ms",
                 [percentile(ms, 50)], sample_kind=tr)
    p99 = Figure(kind, "recovery", "recovery p99", "ms", [percentile(ms, 99)], sample_kind=tr)
    worst = Figure(kind, "recovery", "recovery max", "ms", [max(ms)], sample_kind=tr)
    for f in (p50, p99, worst):
        f.note = f"lease_ttl {ttl:g} s, bound lease_ttl + stall_grace + 2 s = {bound:g} s"
    p99.expect("<=", 1000 * (ttl + 1), text=f"<= lease_ttl + 1 s ({1000 * (ttl + 1):,.0f} ms)")
    worst.expect("<=", 1000 * bound, text=f"<= bound ({1000 * bound:,.0f} ms)")
    every = Figure(kind, "recovery", "recovery, all trials", "ms", ms, sample_kind=tr)
    return [p50, p99, worst, every]
