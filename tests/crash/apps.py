"""The app the crash tests run in their worker subprocesses (``tests.crash.apps:app``).

Configuration comes from the environment the test gives each worker:

* ``TETHER_URL``: the test's isolated store;
* ``TETHER_TEST_DIR``: where the records below go (one file per worker pid, JSON lines);
* ``TETHER_TEST_LEASE_TTL`` (default 2.0) and ``TETHER_TEST_SHUTDOWN_TIMEOUT`` (default 10);
* ``TETHER_TEST_REAPER_INTERVAL`` (default 5; 0: no reaper in workers) and
  ``TETHER_TEST_RETENTION_FAILED`` (default 7 days), for the maintenance tests.

Records, so a test can prove what happened inside a worker it signalled:

* ``runs-<pid>.jsonl``: every handler start, end and interruption: job, attempt, pid, wall time;
* ``events-<pid>.jsonl``: ``lease_lost`` (detail ``why`` from the heartbeater, ``rejected``
  from the completer's fenced write) and ``leadership_acquired``/``leadership_lost``.

Handlers return ``{"job", "attempt", "pid"}`` so the stored result says which attempt won.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import tether
from tether.events import Event

app = tether.App(
    lease_ttl=float(os.environ.get("TETHER_TEST_LEASE_TTL", "2.0")),
    shutdown_timeout=float(os.environ.get("TETHER_TEST_SHUTDOWN_TIMEOUT", "10")),
    poll_interval=0.2,
    reaper_interval=float(os.environ.get("TETHER_TEST_REAPER_INTERVAL", "5")),
    retention_failed=float(os.environ.get("TETHER_TEST_RETENTION_FAILED", str(7 * 86400))),
)

FAST_RETRY = tether.Backoff(base=0.2, factor=1.0, max=0.2, jitter=0.0)


def _dir() -> Path:
    return Path(os.environ.get("TETHER_TEST_DIR", "."))


def record(kind: str, **fields: Any) -> None:
    """Append one JSON line with a single write (O_APPEND keeps concurrent lines whole)."""
    line = json.dumps({**fields, "pid": os.getpid(), "t": time.time()}) + "\n"
    fd = os.open(_dir() / f"{kind}-{os.getpid()}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _run(event: str, **extra: Any) -> None:
    job = tether.current_job()
    record("runs", event=event, job=job.id, attempt=job.attempt, **extra)


def _result() -> dict[str, Any]:
    job = tether.current_job()
    return {"job": job.id, "attempt": job.attempt, "pid": os.getpid()}


def _poll(seconds: float) -> None:
    """Run for ``seconds`` of *active* time, polling for interruption every 50 ms.

    Time spent SIGSTOPped does not count (each step counts at most 0.1 s), so a paused worker
    resumes still inside its handler and must be told to stop by its heartbeater."""
    job = tether.current_job()
    active = 0.0
    while active < seconds:
        t = time.monotonic()
        if job.cancelled:
            _run("interrupted", reason=job.stop_reason)
            job.check_cancelled()  # raises the matching Interrupted
        job.wait(0.05)
        active += min(time.monotonic() - t, 0.1)


@app.task(name="crash.work", max_attempts=5, max_stalls=3)
def work(first: float, later: float = 0.0, interruptible: bool = False) -> dict[str, Any]:
    """Sleep ``first`` seconds on attempt 1 and ``later`` on any later attempt.

    ``interruptible``: poll ``current_job().cancelled`` instead of a blind ``time.sleep``."""
    _run("start")
    seconds = first if tether.current_job().attempt == 1 else later
    if interruptible:
        _poll(seconds)
    else:
        time.sleep(seconds)
    _run("end")
    return _result()


@app.task(name="crash.until_cancelled", max_attempts=5)
def until_cancelled(limit: float = 60.0) -> dict[str, Any]:
    """Loop on ``check_cancelled()`` until told to stop (or ``limit`` seconds pass)."""
    _run("start")
    job = tether.current_job()
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            job.check_cancelled()
        except tether.Interrupted as exc:
            _run("interrupted", reason=type(exc).__name__)
            raise
        time.sleep(0.05)
    _run("end")
    return _result()


@app.task(name="crash.suicide", max_attempts=10, max_stalls=2)
def suicide() -> None:
    """SIGKILL the worker running this handler: a crash the worker cannot see coming."""
    _run("start")
    os.kill(os.getpid(), signal.SIGKILL)


@app.task(name="crash.slow", timeout=1, max_attempts=2, retry=FAST_RETRY)
def slow(seconds: float = 5.0) -> dict[str, Any]:
    """Outlives its 1 s timeout; does not poll, so it returns late, after the timeout."""
    _run("start")
    time.sleep(seconds)
    _run("end")
    return _result()


@app.task(name="crash.ledger", max_attempts=25, retry=FAST_RETRY)
def ledger(seconds: float = 0.1) -> None:
    """PostgreSQL: write a ledger row and complete the attempt in one transaction.

    The sleep is *inside* the transaction, so a worker killed (or a backend terminated)
    mid-handler leaves an open transaction that must roll back."""
    _run("start")
    job = tether.current_job()
    # The ledger lives in the test's schema, which is not on the connection's search_path
    # (tether names its own schema in its statements and leaves the user's path alone).
    schema = parse_qs(urlsplit(os.environ["TETHER_URL"]).query)["schema"][0]
    with job.transaction() as conn:
        conn.execute(f'INSERT INTO "{schema}".ledger (job_id, attempt, pid) VALUES (%s, %s, %s)',
                     (job.id, job.attempt, os.getpid()))
        time.sleep(seconds)
    _run("end")


def _on_event(event: Event) -> None:
    record("events", event=event.name, job=event.job_id, attempt=event.attempt,
           worker=event.worker, detail=event.detail)


for _name in ("lease_lost", "leadership_acquired", "leadership_lost"):
    app.on(_name, _on_event)
