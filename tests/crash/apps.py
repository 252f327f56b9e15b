"""The app the crash tests run in their worker subprocesses (``tests.crash.apps:app``).

Configuration comes from the environment the test gives each worker:

* ``TETHER_URL``: the test's isolated store;
* ``TETHER_TEST_DIR``: where the records below go (one file per worker pid, JSON lines);
* ``TETHER_TEST_LEASE_TTL`` (default 2.0) and ``TETHER_TEST_SHUTDOWN_TIMEOUT`` (default 10);
* ``TETHER_TEST_DEATH_CHECK_INTERVAL`` (default 0.25; 0: no death detection, the lease
  alone decides, for the tests of the lease path);
* ``TETHER_TEST_REAPER_INTERVAL`` (default 5; 0: no reaper in workers) and
  ``TETHER_TEST_RETENTION_FAILED`` (default 7 days), for the maintenance tests.

Records, so a test can prove what happened inside a worker it signalled:

* ``runs-<pid>.jsonl``: every handler start, end and interruption: job, attempt, pid, wall time;
* ``events-<pid>.jsonl``: ``lease_lost`` (detail ``why`` from the heartbeater, ``rejected``
  from the completer's fenced write) and ``leadership_acquired``/``leadership_lost``;
  ``child_exited`` of process-pool workers (detail ``child`` pid, ``why``, ``status``);
* ``spin-<job>-<attempt>.log``: the side effect of the busy-looping tasks, one wall time per
  line every 20 ms, so a test sees whether the handler is still running.
* ``grandchild-<job>-<attempt>.log``: the side effect of a subprocess a handler started (one
  line every 50 ms), so a test sees whether it outlived its attempt.

With ``--pool process`` handlers run in child processes: ``pid`` in ``runs`` records is then
the child's, and the events come from the worker (the parent).

Handlers return ``{"job", "attempt", "pid"}`` so the stored result says which attempt won.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import tether
from tether._events import Event

app = tether.App(
    lease_ttl=float(os.environ.get("TETHER_TEST_LEASE_TTL", "2.0")),
    shutdown_timeout=float(os.environ.get("TETHER_TEST_SHUTDOWN_TIMEOUT", "10")),
    poll_interval=0.2,
    reaper_interval=float(os.environ.get("TETHER_TEST_REAPER_INTERVAL", "5")),
    death_check_interval=float(os.environ.get("TETHER_TEST_DEATH_CHECK_INTERVAL", "0.25")),
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


# -- process-pool tasks ----------------------------------------------------------------------
def spin_file(job_id: int, attempt: int) -> Path:
    return _dir() / f"spin-{job_id}-{attempt}.log"


def _busy(seconds: float) -> None:
    """A pure-Python busy loop for ``seconds``: it never blocks, never polls cancellation, and
    appends its wall time to its side-effect file every 20 ms."""
    job = tether.current_job()
    path = spin_file(job.id, job.attempt)
    end = time.monotonic() + seconds
    next_write = 0.0
    try:
        while (now := time.monotonic()) < end:
            if now >= next_write:
                with open(path, "a") as f:
                    f.write(f"{time.time()!r}\n")
                next_write = now + 0.02
    finally:  # a stopped child unwinds through here (SystemExit), knowing why
        if job.cancelled:
            _run("stopped", reason=job.stop_reason)


@app.task(name="crash.spin", timeout=1, max_attempts=2, retry=FAST_RETRY)
def spin(first: float, later: float = 0.0) -> dict[str, Any]:
    """Busy-loops ``first`` seconds on attempt 1 (past its 1 s timeout), ``later`` after."""
    _run("start")
    _busy(first if tether.current_job().attempt == 1 else later)
    _run("end")
    return _result()


@app.task(name="crash.spin_once", max_attempts=5)
def spin_once(limit: float = 30.0, announce: bool = False) -> dict[str, Any]:
    """Busy-loops up to ``limit`` seconds on attempt 1 (no timeout); later attempts return.
    With ``announce``, attempt 1 first sets its progress: in a process pool the worker writes
    it only once it has read the child's ``start`` (its pipe is read in order), so a progress
    in the store shows from outside that the worker knows the child runs the job."""
    _run("start")
    if tether.current_job().attempt == 1:
        if announce:
            tether.current_job().set_progress("spinning")
        _busy(limit)
    _run("end")
    return _result()


@app.task(name="crash.csleep", timeout=1, max_attempts=2, retry=FAST_RETRY)
def csleep(seconds: int = 30) -> dict[str, Any]:
    """Attempt 1 blocks in C (libc ``sleep``, outside the interpreter) past its timeout."""
    _run("start")
    if tether.current_job().attempt == 1:
        ctypes.CDLL(None).sleep(seconds)
    _run("end")
    return _result()


@app.task(name="crash.die", max_attempts=10, max_stalls=2)
def die(how: str, always: bool = False, calm: bool = False) -> dict[str, Any]:
    """Crash the process running it on attempt 1 (every attempt with ``always``, never with
    ``calm``, which teaches a process pool that the task is quick): ``segv``
    (a NULL read through ctypes), ``exit`` (``os._exit(3)``) or ``hog`` (allocate until
    ``--max-memory-per-child`` stops it; returns after 600 MiB if nothing does)."""
    _run("start", how=how)
    if not calm and (always or tether.current_job().attempt == 1):
        if how == "segv":
            ctypes.string_at(0)
        elif how == "exit":
            os._exit(3)
        elif how == "hog":
            hoard = []
            for _ in range(75):
                hoard.append(b"x" * (8 << 20))  # touched pages: they count in the RSS
                time.sleep(0.01)
    _run("end")
    return _result()


def grandchild_file(job_id: int, attempt: int) -> Path:
    return _dir() / f"grandchild-{job_id}-{attempt}.log"


def _start_grandchild(limit: float, segv: bool = False, gil: bool = False) -> dict[str, Any]:
    """Attempt 1 starts a shell loop that appends a line every 50 ms to its side-effect file
    (a stand-in for ffmpeg, rsync or a payment CLI), records its pid, and waits ``limit``
    seconds without looking at cancellation and without ever stopping the subprocess, as a
    careless handler would (``segv``: crashes its process instead; ``gil``: waits in a C call
    that holds the GIL, as a CPU-bound extension may); later attempts return at once."""
    job = tether.current_job()
    if job.attempt == 1:
        path = grandchild_file(job.id, job.attempt)
        loop = f'while true; do echo x >> "{path}"; sleep 0.05; done'
        proc = subprocess.Popen(["sh", "-c", loop])
        _run("start", grandchild=proc.pid)
        wait_for_file = time.monotonic() + 10
        while not path.exists() and time.monotonic() < wait_for_file:
            time.sleep(0.01)  # the side effect has begun before the handler goes on
        if segv:
            ctypes.string_at(0)
        if gil:  # libc sleep through PyDLL keeps the GIL: no other thread of the child runs
            ctypes.PyDLL(None).sleep(int(limit))
        time.sleep(limit)
    else:
        _run("start")
    _run("end")
    return _result()


@app.task(name="crash.grandchild", max_attempts=5)
def grandchild(limit: float = 60.0, segv: bool = False, gil: bool = False) -> dict[str, Any]:
    return _start_grandchild(limit, segv, gil)


@app.task(name="crash.grandchild_timeout", timeout=1, max_attempts=2, retry=FAST_RETRY)
def grandchild_timeout(limit: float = 60.0) -> dict[str, Any]:
    return _start_grandchild(limit)


@app.task(name="crash.pid")
def pid() -> dict[str, Any]:
    return {**_result(), "ppid": os.getppid()}


@app.task(name="crash.follow")
def follow() -> dict[str, Any]:
    """Enqueues a follow-up job from inside the handler: it must land in the worker's store."""
    return {**_result(), "next": int(pid.enqueue())}


@app.task(name="crash.apid")
async def apid() -> dict[str, Any]:
    await asyncio.sleep(0.01)
    return {**_result(), "ppid": os.getppid(), "loop": True}


@app.task(name="crash.checkpoints", max_attempts=5)
def checkpoints(limit: float = 30.0) -> dict[str, Any]:
    """Attempt 1 saves checkpoint i and progress {"i": i} for i = 1, 2, ... every 10 ms
    (recording "try" before each) until a write is rejected; later attempts return what they
    were given."""
    job = tether.current_job()
    _run("start")
    if job.attempt == 1:
        end = time.monotonic() + limit
        i = 0
        while time.monotonic() < end:
            i += 1
            _run("try", value=i)
            try:
                job.save_checkpoint(i)
                job.set_progress({"i": i})
            except tether.LeaseLost:
                _run("rejected", value=i)
                raise
            time.sleep(0.01)
    return {**_result(), "checkpoint": job.checkpoint, "progress": job.progress}


def _on_event(event: Event) -> None:
    record("events", event=event.name, job=event.job_id, attempt=event.attempt,
           worker=event.worker, detail=event.detail)


for _name in ("lease_lost", "leadership_acquired", "leadership_lost", "child_exited"):
    app.on(_name, _on_event)
