"""Scenario 7, memory: a real worker's resident set (VmRSS from /proc/PID/status).

Per run: ``tether worker -c C`` on an empty isolated store; RSS once it has registered and sat
idle for a second ("idle"); then M no-op jobs are enqueued and RSS is sampled every 20 ms until
they are all done ("peak while draining"); then once more after a second of idleness.
"""

from __future__ import annotations

import time

from bench.common import Config, Figure, isolated
from bench.procs import WorkerProc, outstanding, wait_registered
from bench.scenarios.drain import load


def memory_once(kind: str, cfg: Config) -> tuple[float, float, float]:
    """(idle, peak while draining, idle after) RSS in MiB."""
    from bench.apps import make_app

    with isolated(kind, cfg) as url:
        app = make_app(url)
        worker: WorkerProc | None = None
        try:
            app.store.migrate()
            worker = WorkerProc(url, cfg.memory_concurrency, log_dir=cfg.workdir)
            wait_registered(app.store, [worker])
            time.sleep(cfg.memory_settle)
            idle = worker.rss_kb()
            last = load(url, cfg.memory_jobs)
            peak = idle
            deadline = time.monotonic() + max(120.0, cfg.memory_jobs / 200)
            while time.monotonic() < deadline:
                peak = max(peak, worker.rss_kb())
                job = app.store.get_job(last)
                if job is not None and job.status == "done" and outstanding(app.store) == 0:
                    break
                if not worker.alive():
                    raise RuntimeError(f"worker died:\n{worker.log_tail()}")
                time.sleep(0.02)
            else:
                raise TimeoutError("memory drain did not finish")
            time.sleep(cfg.memory_settle)
            after = worker.rss_kb()
            return idle / 1024, peak / 1024, after / 1024
        finally:
            if worker is not None:
                worker.stop()
            app.close()


def run(kind: str, cfg: Config) -> list[Figure]:
    samples = [memory_once(kind, cfg) for _ in range(cfg.runs)]
    c, m = cfg.memory_concurrency, cfg.memory_jobs
    return [
        Figure(kind, "memory", f"worker RSS idle (-c {c})", "MiB", [s[0] for s in samples]),
        Figure(kind, "memory", f"worker RSS peak while draining {m:,}", "MiB",
               [s[1] for s in samples]),
        Figure(kind, "memory", "worker RSS idle after the drain", "MiB",
               [s[2] for s in samples]),
    ]
