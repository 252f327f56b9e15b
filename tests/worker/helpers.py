"""Run a real worker in-process (a thread) and wait on conditions, never on fixed sleeps."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import tether
from tether._worker.worker import Worker


def wait_until(cond: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


@contextmanager
def running(app: tether.App, **options: Any) -> Iterator[Worker]:
    worker: Worker = app.worker(**options)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run(install_signals=False)),
                              daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop(force=True)
        thread.join(15)
        assert not thread.is_alive(), "worker did not stop"


def status(app: tether.App, job_id: int) -> str:
    return app.get_job(job_id).status
