"""Worker start to first job: a job already queued, then ``tether worker`` is spawned.

Per run: a fresh isolated store holding one queued ``bench.record`` job, then
``python -m tether._cli.main worker bench.apps:app`` (the defaults, ``-c 10``) is started. The
figure is the handler's ``time.time()`` at entry minus the harness's ``time.time()`` just before
the process was spawned: interpreter start, imports (the app, the CLI, the store driver),
store connections, registration and the first claim. Issue #10's target: under 0.5 s.

tether's modules are byte-compiled first (``compileall``), as ``pip install`` does: with
``PYTHONDONTWRITEBYTECODE`` set (as on the shared test machine) a source checkout would
otherwise be compiled again by every process, which no installed worker does. A second figure,
the worker's CPU time (user + system) up to the first job, does not grow with the machine's
load the way the wall time does.
"""

from __future__ import annotations

import compileall
import os
import time

from bench.apps import RECORD, make_app
from bench.common import ROOT, Config, Figure, isolated
from bench.procs import RecordFile, WorkerProc

TARGET = 0.5


def startup_once(kind: str, cfg: Config) -> tuple[float, float]:
    """(seconds from spawning the worker to its first job's start, CPU seconds by then)."""
    with isolated(kind, cfg) as url:
        record = os.path.join(cfg.workdir, f"startup-{time.time_ns()}.rec")
        records = RecordFile(record)
        app = make_app(url)
        worker: WorkerProc | None = None
        try:
            app.runtime.registry.tasks[RECORD].enqueue(0.0)
            worker = WorkerProc(url, 10, log_dir=cfg.workdir, record=record)
            first = records.wait_for(lambda r: True, 60.0)
            return first.started - worker.started, worker.cpu_seconds()
        finally:
            if worker is not None:
                worker.stop()
            app.close()
            os.unlink(record)


def run(kind: str, cfg: Config) -> list[Figure]:
    compileall.compile_dir(str(ROOT / "src" / "tether"), quiet=1)
    wall, cpu = [], []
    for _ in range(max(cfg.runs, cfg.startup_runs)):
        w, c = startup_once(kind, cfg)
        wall.append(w)
        cpu.append(c)
        time.sleep(0.2)
    fig = Figure(kind, "startup", "worker start to first job (queued before the start)", "s",
                 wall, note="spawn of `tether worker` to the handler's entry, -c 10")
    fig.expect("<", TARGET)
    used = Figure(kind, "startup", "worker CPU time up to its first job", "s", cpu,
                  note="user + system, read when the first job started (0.01 s ticks)")
    return [fig, used]
