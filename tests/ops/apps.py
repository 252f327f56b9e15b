"""The app the operations tests run in real ``tether worker`` subprocesses
(``tests.ops.apps:app``); its store comes from ``$TETHER_URL``."""

from __future__ import annotations

import os
import time

import tether

app = tether.App(
    lease_ttl=float(os.environ.get("TETHER_TEST_LEASE_TTL", "2.0")),
    shutdown_timeout=float(os.environ.get("TETHER_TEST_SHUTDOWN_TIMEOUT", "5")),
    poll_interval=0.1,
)
FAST = tether.Backoff(base=0.05, factor=1.0, max=0.05, jitter=0.0)


@app.task(name="ops.add", queue="ops")
def add(a: int, b: int) -> int:
    return a + b


@app.task(name="ops.boom", queue="ops", max_attempts=2, retry=FAST)
def boom(text: str = "boom") -> None:
    raise ValueError(text)


@app.task(name="ops.slow", queue="ops")
def slow(seconds: float) -> str:
    job = tether.current_job()
    end = time.monotonic() + seconds
    step = 0
    while time.monotonic() < end:
        job.check_cancelled()
        step += 1
        job.set_progress({"step": step})
        time.sleep(0.05)
    return "slept"


@app.task(name="ops.mail", queue="mail", max_attempts=7, priority=3)
def mail(to: str) -> str:
    return to
