"""Real worker subprocesses for the crash tests, and condition waits on the store.

Nothing here sleeps in place of a condition: :func:`wait_for` polls a predicate (usually a
store read) until it holds or a deadline passes, and fails with what it last saw.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from tether._config import Settings, make_settings
from tether._task import make_new_job
from tether.stores import JobRecord, Store

REPO = Path(__file__).resolve().parents[2]
APP = "tests.crash.apps:app"
T = TypeVar("T")


def wait_for(predicate: Callable[[], T | None], timeout: float, what: str,
             interval: float = 0.02) -> T:
    """Poll ``predicate`` until it returns something truthy; return that. Fail after
    ``timeout`` seconds naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what} "
                                 f"(last value: {value!r})")
        time.sleep(interval)


def pid_of(owner: str | None) -> int | None:
    """The pid inside a worker id ``host:pid:uuid``."""
    if not owner:
        return None
    try:
        return int(owner.rsplit(":", 2)[1])
    except (IndexError, ValueError):
        return None


def enqueue(store: Store, task: str, *args: Any, n: int = 1, max_attempts: int = 5,
            max_stalls: int = 3, **kwargs: Any) -> list[int]:
    return store.enqueue([make_new_job(task, args, kwargs, max_attempts=max_attempts,
                                       max_stalls=max_stalls) for _ in range(n)])


def get(store: Store, job_id: int) -> JobRecord:
    job = store.get_job(job_id)
    assert job is not None, f"job {job_id} vanished from the store"
    return job


def jobs(store: Store, ids: list[int]) -> list[JobRecord]:
    return [get(store, i) for i in ids]


def held_by(store: Store, pid: int) -> list[JobRecord]:
    return [j for j in store.list_jobs(status="running", limit=1000) if pid_of(j.locked_by) == pid]


def all_in(store: Store, ids: list[int], status: str) -> list[JobRecord] | None:
    snapshot = jobs(store, ids)
    return snapshot if all(j.status == status for j in snapshot) else None


def result_of(job: JobRecord) -> dict[str, Any]:
    return json.loads(job.result) if job.result else {}


def _holds_store_lock(store: Store, pid: int) -> bool:
    """Whether the (stopped) worker ``pid`` holds a lock of ``store`` that others wait on."""
    if store.kind == "sqlite":
        import sqlite3

        conn = sqlite3.connect(str(store.path), timeout=0.5,  # type: ignore[attr-defined]
                               isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:  # locked: the writer cannot run to release it
            return True
        finally:
            conn.close()
    if store.kind == "postgres":
        import psycopg

        from tests.servers import PG_DSN

        time.sleep(0.1)  # a statement sent just before the stop completes on the server
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s "
                "AND state <> 'idle'", (f"tether-{pid}-%",)).fetchone()
        return bool(row and row[0])
    return False  # Redis runs each step as one script: a stopped client holds nothing


class Worker:
    """One ``tether worker`` subprocess, its log, and the signals the tests send it."""

    def __init__(self, proc: subprocess.Popen[bytes], log: Path, name: str) -> None:
        self.proc = proc
        self.log = log
        self.name = name
        self.stopped = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, sig: signal.Signals) -> float:
        """Send ``sig``; returns the wall time just before sending it."""
        at = time.time()
        os.kill(self.pid, sig)
        if sig == signal.SIGSTOP:
            self.stopped = True
        elif sig == signal.SIGCONT:
            self.stopped = False
        return at

    def pause(self, store: Store) -> float:
        """SIGSTOP the worker at a moment it holds no lock of the store; returns the wall time
        of the stop that stuck.

        A stop that lands inside one of the worker's store transactions (a heartbeat, a
        reaper sweep) leaves it holding SQLite's write lock, or PostgreSQL row locks while
        its session sits "idle in transaction": every other writer then waits on a process
        that cannot run, and no job can be recovered until it resumes (tests/sqlite/
        test_write_lock.py covers that case). A test about a paused *job holder* needs the
        worker paused between transactions, so a stop that caught one is undone and tried
        again a moment later."""
        for _ in range(100):
            at = self.send(signal.SIGSTOP)
            if not _holds_store_lock(store, self.pid):
                return at
            self.send(signal.SIGCONT)
            time.sleep(0.05)
        raise AssertionError(f"{self} held a store lock at each of 100 stops")

    def kill(self) -> float:
        """SIGKILL and reap; returns the wall time of the kill."""
        at = self.send(signal.SIGKILL)
        self.proc.wait(10)
        return at

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError as exc:
            return f"<no log: {exc}>"

    def logged(self, text: str) -> bool:
        return text in self.log_text()

    def logged_at(self, pattern: str) -> float:
        """The time (epoch seconds) of the first log line matching the regex ``pattern``: the
        worker's own clock, so intervals between its lines leave out start-up and exit."""
        for line in self.log_text().splitlines():
            if re.search(pattern, line):
                return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        raise AssertionError(f"{self} never logged {pattern!r}:\n{self.log_text()}")

    def __repr__(self) -> str:
        return f"<worker {self.name} pid={self.pid} rc={self.proc.poll()}>"


class Cluster:
    """The worker processes of one test, all on the test's isolated store URL."""

    def __init__(self, url: str, folder: Path, *, lease_ttl: float = 2.0,
                 shutdown_timeout: float = 10.0) -> None:
        self.url = url
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lease_ttl = lease_ttl
        self.shutdown_timeout = shutdown_timeout
        self.settings: Settings = make_settings(lease_ttl=lease_ttl)
        self.workers: list[Worker] = []

    def spawn(self, concurrency: int = 2, *extra: str, env: dict[str, str] | None = None,
              app: str = APP) -> Worker:
        """A ``tether worker`` process; ``env`` adds variables (``TETHER_TEST_*`` settings),
        ``app`` another test app (MODULE:APP)."""
        return self._start(["worker", app, "-c", str(concurrency), *extra], env)

    def spawn_reaper(self, *args: str, env: dict[str, str] | None = None) -> Worker:
        """A ``tether reaper`` process (``args``: e.g. ``APP``, or ``--url URL``)."""
        return self._start(["reaper", *args], env)

    def _start(self, argv: list[str], env: dict[str, str] | None) -> Worker:
        name = f"w{len(self.workers)}"
        log = self.folder / f"{name}.log"
        full_env = {
            **os.environ,
            "TETHER_URL": self.url,
            "TETHER_TEST_DIR": str(self.folder),
            "TETHER_TEST_LEASE_TTL": str(self.lease_ttl),
            "TETHER_TEST_SHUTDOWN_TIMEOUT": str(self.shutdown_timeout),
            "TETHER_LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
            **(env or {}),  # the caller's win, TETHER_URL included
        }
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tether._cli.main", *argv],
                cwd=REPO, env=full_env, stdout=out, stderr=subprocess.STDOUT,
            )
        worker = Worker(proc, log, name)
        self.workers.append(worker)
        return worker

    def wait_registered(self, store: Store, *workers: Worker, timeout: float = 20.0) -> None:
        """Until every given worker has registered its row in the store (it is claiming)."""
        def ready() -> bool:
            for w in workers:
                assert w.alive(), f"{w} exited before registering:\n{w.log_text()}"
            pids = {info.pid for info in store.list_workers()}
            return all(w.pid in pids for w in workers)

        wait_for(ready, timeout, f"workers {[w.pid for w in workers]} to register")

    def records(self, kind: str) -> list[dict[str, Any]]:
        """Every record of ``kind`` (``runs`` or ``events``) from every worker, by time."""
        out: list[dict[str, Any]] = []
        for path in self.folder.glob(f"{kind}-*.jsonl"):
            for line in path.read_text().splitlines():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:  # a line still being written
                    continue
        return sorted(out, key=lambda r: r["t"])

    def close(self) -> None:
        """SIGCONT what is stopped, SIGKILL what is still alive (by pid), and reap all."""
        for w in self.workers:
            if w.alive() and w.stopped:
                try:
                    w.send(signal.SIGCONT)
                except ProcessLookupError:
                    pass
        for w in self.workers:
            if w.alive():
                try:
                    os.kill(w.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                w.proc.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover - should never happen
                pass

    def report(self) -> list[tuple[str, str]]:
        """(title, text) sections: every worker's log and the records, for failure reports."""
        sections = [(f"{w.name} pid={w.pid} rc={w.proc.poll()} log", w.log_text()[-20000:])
                    for w in self.workers]
        for kind in ("runs", "events"):
            lines = [json.dumps(r) for r in self.records(kind)]
            if lines:
                sections.append((f"{kind} records", "\n".join(lines[-300:])))
        return sections


def handlers_started(cluster: Cluster, pid: int, ids: set[int]) -> bool:
    """Whether ``pid`` recorded a handler start for every job of ``ids``: claimed is not
    enough (a job claimed but still waiting for a handler thread when the process froze is
    handed back on thaw instead of run)."""
    return {r["job"] for r in cluster.records("runs")
            if r["pid"] == pid and r["event"] == "start"} >= ids


def start_zombie(cluster: Cluster, store: Store) -> tuple[Worker, int, int]:
    """The zombie test's start, shared by test_crash and test_remote_crash: enqueue ``blind``
    (a handler that only sleeps, 3 s) and ``polling`` (one that polls
    ``current_job().cancelled``, 30 s), both 0.2 s on later attempts; spawn the worker the
    test will pause and wait until it holds both and both handlers run. Returns (that
    worker, blind, polling)."""
    [blind] = enqueue(store, "crash.work", 3.0, 0.2)
    [polling] = enqueue(store, "crash.work", 30.0, 0.2, interruptible=True)
    zombie = cluster.spawn(2)
    wait_for(lambda: len(held_by(store, zombie.pid)) == 2, 20, "the first worker to hold both")
    wait_for(lambda: handlers_started(cluster, zombie.pid, {blind, polling}), 20,
             "both handlers to start on the first worker")
    return zombie, blind, polling


def check_zombie_fenced_out(cluster: Cluster, store: Store, zombie: Worker, live: Worker,
                            blind: int, polling: int, timeout: float, where: str = "") -> None:
    """The zombie test's end, shared by a direct store (test_crash) and the server
    (test_remote_crash), since fencing is the store's either way. ``zombie`` ran attempt 1
    of ``blind`` (a handler that only sleeps) and ``polling`` (one that polls
    ``current_job().cancelled``), was SIGSTOPped past its lease while ``live`` re-ran and
    finished both, and has just been SIGCONTed. Waits until the zombie was told (its
    completion of ``blind`` rejected as already done, its lease of ``polling`` lost and that
    handler interrupted), then checks that no stale write was applied: the blind handler did
    try to complete, and both jobs still hold the live worker's attempt-2 result."""

    def zombie_noticed() -> bool:
        events = [r for r in cluster.records("events")
                  if r["pid"] == zombie.pid and r["event"] == "lease_lost"]
        runs = [r for r in cluster.records("runs") if r["pid"] == zombie.pid]
        rejected = any(r["job"] == blind and r["attempt"] == 1
                       and r["detail"].get("rejected") == "done" for r in events)
        lost = any(r["job"] == polling and r["attempt"] == 1 for r in events)
        interrupted = any(r["job"] == polling and r["attempt"] == 1
                          and r["event"] == "interrupted" for r in runs)
        return rejected and lost and interrupted

    wait_for(zombie_noticed, timeout, "the zombie's completion to be rejected and its "
             f"polling handler interrupted{where}")
    assert any(r["pid"] == zombie.pid and r["job"] == blind and r["event"] == "end"
               for r in cluster.records("runs"))
    for job in jobs(store, [blind, polling]):
        assert (job.status, job.attempt) == ("done", 2)
        assert result_of(job) == {"job": job.id, "attempt": 2, "pid": live.pid}
