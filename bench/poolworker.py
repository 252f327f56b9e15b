"""An instrumented process-pool worker for the pool scenario:
``python -m bench.poolworker CONCURRENCY PROBES``.

The real :class:`tether._worker.worker.Worker` with ``pool="process"`` (what ``tether worker
--pool process`` runs), in this process, with two probes appending ``what job attempt time``
lines to PROBES:

* ``learned``: the pool's interrupt hook ran for an attempt (the moment the worker learned it
  must stop it: a heartbeat reporting the lease lost or a cancel requested, or the deadline);
* ``exited``: the ``child_exited`` event (the worker saw the child's pipe close and reaped it).

SIGTERM stops it like ``tether worker``.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from tether._events import Event
from tether._worker.processes.pool import ProcessPool


def _probe(path: str, what: str, job: int | None, attempt: int | None) -> None:
    line = f"{what} {job} {attempt} {time.time()!r}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    concurrency, path = int(argv[0]), argv[1]
    from bench.apps import app

    original = ProcessPool._interrupted

    def interrupted(self: ProcessPool, entry: Any, why: Any) -> None:
        _probe(path, "learned", entry.ctx.id, entry.ctx.attempt)
        original(self, entry, why)

    ProcessPool._interrupted = interrupted  # type: ignore[method-assign]

    def exited(event: Event) -> None:
        _probe(path, "exited", event.job_id, event.attempt)

    app.on("child_exited", exited)
    worker = app.worker(concurrency=concurrency, pool="process", app_spec="bench.apps:app")
    return int(worker.run())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
