"""Tasks for the in-process process-pool tests (tests/worker/test_pool.py).

The worker runs in the test's process with a per-test App (its own store); its children import
``tests.worker.pool_tasks:app``, which registers the same tasks under the same names.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

import tether
from tether._logs import JsonFormatter

FAST = tether.Backoff(base=0.01, factor=1.0, max=0.01, jitter=0.0)


def register(app: tether.App) -> None:
    @app.task(name="pool.add")
    def add(a: int, b: int) -> dict[str, Any]:
        return {"sum": a + b, "pid": os.getpid()}

    @app.task(name="pool.amul")
    async def amul(a: int, b: int) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return {"product": a * b, "pid": os.getpid()}

    @app.task(name="pool.fail", max_attempts=5)
    def fail() -> None:
        raise tether.Fail("bad input")

    @app.task(name="pool.flaky", max_attempts=3, retry=FAST)
    def flaky() -> int:
        attempt = tether.current_job().attempt
        if attempt < 3:
            raise RuntimeError(f"boom {attempt}")
        return attempt

    @app.task(name="pool.later", max_attempts=5)
    def later() -> str:
        if tether.current_job().attempt == 1:
            raise tether.Retry("not yet", delay=0.05)
        return "ok"

    @app.task(name="pool.unjson", max_attempts=1)
    def unjson() -> object:
        return object()

    @app.task(name="pool.txn", max_attempts=1)
    def txn() -> None:
        with tether.current_job().transaction():
            pass

    @app.task(name="pool.ckpt")
    def ckpt(text: str) -> dict[str, Any]:
        job = tether.current_job()
        seen = job.checkpoint
        job.save_checkpoint({"seen": seen, "n": 1})
        job.set_progress({"at": 1, "text": text})
        return {"dedup": job.dedup_key, "queue": job.queue, "seen": seen,
                "checkpoint": job.checkpoint, "progress": job.progress, "text": text}

    @app.task(name="pool.wf_sum")
    def wf_sum(sums: list[dict[str, Any]], extra: int = 0) -> dict[str, Any]:
        """A chord's callback: its piped list, and what ``current_job()`` reads of its
        parents, from a child that has no store (the worker reads for it)."""
        job = tether.current_job()
        return {"total": sum(s["sum"] for s in sums) + extra, "parents": list(job.parents),
                "results": job.parent_results(), "pid": os.getpid()}

    @app.task(name="pool.nap", max_attempts=3)
    def nap(seconds: float, log: str) -> dict[str, Any]:
        """Sleep; a line ``job attempt pid`` in ``log`` says it started (one O_APPEND write)."""
        _started(log)
        time.sleep(seconds)
        return {"pid": os.getpid()}

    @app.task(name="pool.timed", timeout=1, max_attempts=2, retry=FAST)
    def timed(seconds: float, log: str) -> dict[str, Any]:
        _started(log)
        time.sleep(seconds)
        return {"pid": os.getpid()}


    @app.task(name="pool.logs")
    def logs(path: str) -> None:
        """Logs one line through a JSON file handler of its own, in the child (issue #24)."""
        handler = logging.FileHandler(path)
        handler.setFormatter(JsonFormatter())
        user = logging.getLogger("tests.pool.user")
        user.addHandler(handler)
        user.setLevel(logging.INFO)
        try:
            user.info("from the child")
        finally:
            user.removeHandler(handler)
            handler.close()


def _started(log: str) -> None:
    job = tether.current_job()
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{job.id} {job.attempt} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def starts(log: str) -> list[tuple[int, int, int]]:
    """(job, attempt, pid) of every start ``_started`` recorded."""
    try:
        with open(log) as f:
            return [(int(a), int(b), int(c)) for a, b, c in (line.split() for line in f)]
    except FileNotFoundError:
        return []


app = tether.App()
register(app)
