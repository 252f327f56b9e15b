"""Scenario 8, pool: the process pool (``--pool process``) beside the thread pool.

* drain: N no-op jobs drained by ONE real ``tether worker --pool thread|process -c C`` (C = 2
  and 10; runs alternate between the pools), rate from the worker's registration to all done.
  A process pool registers once its children have started and imported the app, so the rate is
  the steady one, like the ``drain`` scenario's. Target (issue #23, was 50 %): the process pool
  >= 60 % of the thread pool's rate at the same concurrency (each run's pair compared).
* stop: one busy-looping job at a time (pure Python: nothing but a kill stops it) on an
  instrumented process-pool worker (``bench.poolworker``, ``-c 2``, lease_ttl 3 s, so a
  heartbeat every second), stopped three ways: *lease* (the harness takes the lease back with
  ``reap_expired(now=now + 1 h)``, as if it had expired; the worker learns at its next
  heartbeat), *cancel* (``Store.cancel``; learned at the next heartbeat) and *timeout* (the
  task's 1 s timeout; learned at the deadline). Lease and cancel land at a random phase of the
  heartbeat. Per trigger, p50/p99/max over the trials of: trigger -> the child's death, and
  the worker learning it -> the child's death (target: max <= 1 s). Death = the worker saw
  the child's pipe close and reaped it (its ``child_exited`` event).
* cpu: M jobs of fixed pure-Python CPU work (``bench.cpu``) on ``-c 2``: wall time from
  registration to all done with each pool, and the speed-up.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from bench.apps import CPU, SPIN, SPIN_TIMEOUT, make_app
from bench.common import Config, Figure, isolated, percentile
from bench.procs import RecordFile, WorkerProc, wait_drained, wait_registered
from bench.scenarios.drain import load

POOLS = ("thread", "process")
TRIGGERS = ("lease", "cancel", "timeout")


def drain_rate(kind: str, cfg: Config, n: int, concurrency: int,
               pool: str) -> tuple[float, float]:
    """(steady jobs/s, CPU seconds per job of the worker's process tree, children included)."""
    with isolated(kind, cfg) as url:
        last = load(url, n)
        app = make_app(url)
        worker: WorkerProc | None = None
        try:
            worker = WorkerProc(url, concurrency, log_dir=cfg.workdir,
                                extra_args=("--pool", pool))
            registered = wait_registered(app.store, [worker])
            cpu0 = worker.tree_cpu_seconds()
            done = wait_drained(app.store, last, timeout=max(120.0, n / 100), worker=worker)
            cpu = worker.tree_cpu_seconds() - cpu0
            return n / max(done - registered, 1e-9), cpu / n
        finally:
            if worker is not None:
                worker.stop()
            app.close()


def cpu_wall(kind: str, cfg: Config, pool: str) -> float:
    with isolated(kind, cfg) as url:
        app = make_app(url)
        worker: WorkerProc | None = None
        try:
            ids = app.runtime.registry.tasks[CPU].enqueue_many(
                [((cfg.pool_cpu_iters,), {})] * cfg.pool_cpu_jobs)
            worker = WorkerProc(url, 2, log_dir=cfg.workdir, extra_args=("--pool", pool))
            registered = wait_registered(app.store, [worker])
            done = wait_drained(app.store, ids[-1], timeout=300.0, worker=worker)
            return done - registered
        finally:
            if worker is not None:
                worker.stop()
            app.close()


class Probes:
    """Reads ``bench.poolworker``'s probe lines: when it learned, when the child exited."""

    def __init__(self, path: str) -> None:
        self.path = path
        Path(path).touch()

    def first(self, what: str, job_id: int) -> float | None:
        for line in Path(self.path).read_text().splitlines():
            kind, job, attempt, at = line.split()
            if kind == what and job == str(job_id) and attempt == "1":
                return float(at)
        return None

    def wait(self, job_id: int, timeout: float) -> tuple[float, float]:
        deadline = time.monotonic() + timeout
        while True:
            learned, exited = self.first("learned", job_id), self.first("exited", job_id)
            if learned is not None and exited is not None:
                return learned, exited
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id}: the child was not stopped")
            time.sleep(0.005)


def stop_trials(kind: str, cfg: Config) -> dict[str, tuple[list[float], list[float]]]:
    """Per trigger: (trigger -> death, learned -> death) seconds, one pair per trial."""
    out: dict[str, tuple[list[float], list[float]]] = {t: ([], []) for t in TRIGGERS}
    ttl = cfg.pool_lease_ttl
    with isolated(kind, cfg) as url:
        stem = os.path.join(cfg.workdir, f"pool-{time.time_ns()}")
        starts, probes = RecordFile(stem + ".rec"), Probes(stem + ".probe")
        app = make_app(url, lease_ttl=ttl)
        worker: WorkerProc | None = None
        try:
            app.store.migrate()
            worker = WorkerProc(url, 2, log_dir=cfg.workdir, lease_ttl=ttl, record=starts.path,
                                module=["-m", "bench.poolworker", "2", probes.path])
            wait_registered(app.store, [worker])
            for _ in range(cfg.pool_trials):
                for trigger in TRIGGERS:
                    task = SPIN_TIMEOUT if trigger == "timeout" else SPIN
                    job_id = app.runtime.registry.tasks[task].enqueue(time.time())
                    starts.wait_for(lambda r, j=job_id: r.job_id == j and r.attempt == 1, 30.0)
                    at = 0.0
                    if trigger != "timeout":
                        time.sleep(random.uniform(0.0, app.runtime.settings.heartbeat_every))
                        at = time.time()
                        if trigger == "lease":  # PostgreSQL skips a row a heartbeat locks
                            while not app.store.reap_expired(now=app.store.now() + 3600):
                                time.sleep(0.001)
                        else:
                            app.store.cancel(job_id)
                    learned, exited = probes.wait(job_id, 15.0)
                    out[trigger][0].append(exited - (at or learned))
                    out[trigger][1].append(exited - learned)
        finally:
            if worker is not None:
                worker.stop(timeout=10.0)
            app.close()
            for path in (starts.path, probes.path):
                os.unlink(path)
    return out


def run(kind: str, cfg: Config) -> list[Figure]:
    figs: list[Figure] = []
    n = cfg.pool_jobs
    for c in cfg.pool_concurrencies:
        rates: dict[str, list[float]] = {p: [] for p in POOLS}
        cpus: dict[str, list[float]] = {p: [] for p in POOLS}
        for _ in range(cfg.runs):
            for pool in POOLS:
                rate, cpu = drain_rate(kind, cfg, n, c, pool)
                rates[pool].append(rate)
                cpus[pool].append(cpu * 1e6)
                time.sleep(0.2)
        for pool in POOLS:
            figs.append(Figure(kind, "pool", f"drain {n:,} no-op jobs, --pool {pool} -c {c}",
                               "jobs/s", rates[pool], note="from worker registration"))
            figs.append(Figure(kind, "pool", f"worker CPU per job, --pool {pool} -c {c}", "us",
                               cpus[pool], note="the worker's process tree (/proc), children "
                                                "included, registration to all done"))
        ratio = Figure(kind, "pool", f"process / thread drain, -c {c}", "%",
                       [100 * p / t for p, t in zip(rates["process"], rates["thread"],
                                                    strict=True)],
                       note="each run's process-pool rate over the thread-pool rate beside it")
        figs.append(ratio.expect(">=", 60.0))
    trials = stop_trials(kind, cfg)
    what = {"lease": "a lease loss", "cancel": "a cancel", "timeout": "a timeout"}
    for trigger in TRIGGERS:
        total, after = ([1000 * s for s in xs] for xs in trials[trigger])
        frm = "the deadline" if trigger == "timeout" else f"{trigger} (heartbeat every " \
            f"{cfg.pool_lease_ttl / 3:g} s)"
        for label, xs, target in (("trigger", total, False), ("worker learned it", after, True)):
            for p, name in ((50, "p50"), (99, "p99"), (100, "max")):
                fig = Figure(kind, "pool", f"{what[trigger]} -> child dead, from {label}: "
                             f"{name}", "ms", [percentile(xs, p)], sample_kind="trials",
                             note=f"{len(xs)} trials; from {frm}" if label == "trigger"
                             else f"{len(xs)} trials")
                if target and name == "max":
                    fig.expect("<=", 1000.0, text="<= 1 s after the worker learns it")
                figs.append(fig)
    walls: dict[str, list[float]] = {p: [] for p in POOLS}
    for _ in range(cfg.runs):
        for pool in POOLS:
            walls[pool].append(cpu_wall(kind, cfg, pool))
    m, iters = cfg.pool_cpu_jobs, cfg.pool_cpu_iters
    for pool in POOLS:
        figs.append(Figure(kind, "pool", f"CPU batch {m} x {iters:,} iterations, --pool {pool} "
                           "-c 2", "s", walls[pool], note="from registration to all done"))
    figs.append(Figure(kind, "pool", "CPU batch speed-up, process over thread (-c 2)", "x",
                       [t / p for t, p in zip(walls["thread"], walls["process"], strict=True)]))
    return figs
