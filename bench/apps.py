"""The app that benchmark workers load: ``tether worker bench.apps:app``.

Settings come from the environment so the harness can start real ``tether worker``
subprocesses with its own store URL and lease settings:

* ``TETHER_URL``: the (isolated) store URL;
* ``BENCH_LEASE_TTL``: lease_ttl in seconds (default 30, tether's default);
* ``BENCH_DEATH_CHECK``: death_check_interval in seconds (default tether's; 0: off);
* ``BENCH_RECORD``: a file that ``bench.record`` / ``bench.crash_once`` append start records to.

A start record is one line ``job_id attempt pid sent started`` (``sent`` is the enqueuer's
``time.time()`` passed as the argument, ``started`` the handler's ``time.time()`` at entry).
The harness lives outside ``src/``, so it reads the clock directly.
"""

from __future__ import annotations

import os
import time
from typing import Any

import tether
from tether import current_job

NOOP = "bench.noop"
SLEEP = "bench.sleep"
RECORD = "bench.record"
CRASH_ONCE = "bench.crash_once"
SPIN = "bench.spin"
SPIN_TIMEOUT = "bench.spin_timeout"
CPU = "bench.cpu"


def _spin(seconds: float) -> None:
    """A pure-Python busy loop: nothing but killing the process stops it early."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _record(sent: float) -> None:
    started = time.time()
    path = os.environ.get("BENCH_RECORD")
    if not path:
        return
    ctx = current_job()
    line = f"{ctx.id} {ctx.attempt} {os.getpid()} {sent!r} {started!r}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one small O_APPEND write: lines from several workers never mix
    finally:
        os.close(fd)


def make_app(url: str | None = None, **settings: Any) -> tether.App:
    """An App with the benchmark tasks registered; ``settings`` override the environment's."""
    options: dict[str, Any] = {"lease_ttl": float(os.environ.get("BENCH_LEASE_TTL", "30"))}
    if os.environ.get("BENCH_DEATH_CHECK"):  # issue #22's check interval (0: off)
        options["death_check_interval"] = float(os.environ["BENCH_DEATH_CHECK"])
    options.update(settings)
    app = tether.App(url or os.environ.get("TETHER_URL"), **options)

    @app.task(name=NOOP)
    def noop() -> None:
        return None

    @app.task(name=SLEEP)
    def sleep(seconds: float) -> None:
        current_job().wait(seconds)  # wakes early when the worker interrupts the handler

    @app.task(name=RECORD)
    def record(sent: float = 0.0) -> None:
        _record(sent)

    @app.task(name=CRASH_ONCE, max_attempts=10, max_stalls=5)
    def crash_once(sent: float = 0.0) -> None:
        """Records its start; the first attempt then hangs (the harness SIGKILLs its worker),
        every later attempt returns at once."""
        _record(sent)
        if current_job().attempt == 1:
            current_job().wait(3600)

    @app.task(name=SPIN, max_attempts=3, max_stalls=3)
    def spin(sent: float = 0.0, seconds: float = 60.0) -> None:
        """Records its start; attempt 1 busy-loops (until its child is killed), later
        attempts return at once."""
        _record(sent)
        if current_job().attempt == 1:
            _spin(seconds)

    @app.task(name=SPIN_TIMEOUT, timeout=1.0, max_attempts=1)
    def spin_timeout(sent: float = 0.0, seconds: float = 60.0) -> None:
        _record(sent)
        _spin(seconds)

    @app.task(name=CPU)
    def cpu(iterations: int) -> int:
        """Fixed CPU work in pure Python (holds the GIL throughout)."""
        total = 0
        for i in range(iterations):
            total += i * i % 7
        return total

    return app


app = make_app()
