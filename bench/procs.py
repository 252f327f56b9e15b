"""Real worker subprocesses, and waiting on the store and on start records."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.common import ROOT
from tether.stores import Store


class WorkerProc:
    """``python -m tether._cli.main worker bench.apps:app -c N`` with an isolated URL."""

    def __init__(self, url: str, concurrency: int, *, log_dir: str, lease_ttl: float = 30.0,
                 record: str | None = None, module: Sequence[str] | None = None,
                 extra_args: Sequence[str] = ()) -> None:
        env = dict(os.environ)
        env["TETHER_URL"] = url
        env["BENCH_LEASE_TTL"] = repr(lease_ttl)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
        if record:
            env["BENCH_RECORD"] = record
        argv = list(module) if module else [
            "-m", "tether._cli.main", "--log-level", "WARNING", "worker", "bench.apps:app",
            "-c", str(concurrency)]
        self.log_path = Path(log_dir) / f"worker-{time.time_ns()}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in wait()/kill()
        self.started = time.time()
        self.proc = subprocess.Popen(
            [sys.executable, *argv, *extra_args], cwd=str(ROOT), env=env,
            stdout=subprocess.PIPE if module else self._log, stderr=self._log)
        self.pid = self.proc.pid

    def rss_kb(self) -> int:
        """VmRSS of the worker process in KiB (0 once it is gone)."""
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def cpu_seconds(self) -> float:
        """User + system CPU time the worker process has used so far (0 once it is gone):
        the CPU a drain costs per job, steadier than its rate on a machine others load."""
        return process_cpu_seconds(self.pid)

    def tree_cpu_seconds(self) -> float:
        """:func:`tree_cpu_seconds` of the worker: its process tree, children included."""
        return tree_cpu_seconds(self.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (graceful drain), then SIGKILL after ``timeout``."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.proc.wait()
        self._close()

    def _close(self) -> None:
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def process_cpu_seconds(pid: int) -> float:
    """CPU time (user + system, every thread, exited ones too) of a live process, to the
    nanosecond; 0.0 once it is gone.

    Why not /proc/PID/stat alone: it counts in clock ticks (10 ms here), so a short run that
    cost a process 6 ms of CPU read as 0 or 10 ms depending on where the ticks fell (a
    60-job remote drain's server CPU read 0.0 in a CI run). Linux exposes every process's
    CPU clock to clock_gettime as ``(~pid << 3) | 2`` (CPUCLOCK_SCHED, process-wide), the
    kernel's exact runtime; /proc is the fallback where that clock is refused.
    """
    try:
        return time.clock_gettime((~pid << 3) | 2)
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stat_cpu(pid: int) -> tuple[float, list[int]]:
    """(utime + stime + cutime + cstime, child pids) of one process, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, []
    ticks = sum(int(x) for x in fields[11:15])
    children: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return ticks / os.sysconf("SC_CLK_TCK"), children


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and all its live descendants (every thread, the exited
    ones too), plus the children it has already reaped (cutime + cstime), read from /proc.
    Taken twice around a drain, the difference is what the drain cost the worker: a process
    pool's children are counted while they live and after they are reaped."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        cpu, children = _stat_cpu(p)
        total += cpu
        todo += children
    return total


def wait_until(pred: Callable[[], bool], timeout: float, every: float = 0.01,
               what: str = "condition") -> float:
    """Poll ``pred`` until true; returns the time.time() it first held."""
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return time.time()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def wait_registered(store: Store, workers: Sequence[WorkerProc], timeout: float = 30.0) -> float:
    """Until every worker process has its row in the store (it is about to fetch)."""
    pids = {w.pid for w in workers}

    def ready() -> bool:
        for w in workers:
            if not w.alive():
                raise RuntimeError(f"worker {w.pid} exited early:\n{w.log_tail()}")
        return pids <= {info.pid for info in store.list_workers()}

    return wait_until(ready, timeout, what="workers to register")


def outstanding(store: Store) -> int:
    """Jobs still pending or running (one counts() query)."""
    return sum(c.count for c in store.counts() if c.status in ("pending", "running"))


def wait_drained(store: Store, last_id: int, timeout: float,
                 worker: WorkerProc | None = None) -> float:
    """Until no job is pending or running; returns when that was first seen.

    Polls the cheap point lookup of the last enqueued job first, then confirms with one
    ``counts()`` (which on a million-row table is a real query, so it is not polled hot).
    """
    deadline = time.monotonic() + timeout
    while True:
        job = store.get_job(last_id)
        if job is not None and job.status in ("done", "failed", "cancelled"):
            seen = time.time()
            if outstanding(store) == 0:
                return seen
            time.sleep(0.02)
            continue
        if worker is not None and not worker.alive():
            raise RuntimeError(f"worker {worker.pid} died while draining:\n{worker.log_tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"drain not finished after {timeout:.0f}s")
        time.sleep(0.005)


@dataclass(frozen=True)
class StartRecord:
    job_id: int
    attempt: int
    pid: int
    sent: float
    started: float


class RecordFile:
    """Reads start records appended by bench.apps handlers, incrementally."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.records: list[StartRecord] = []
        Path(path).touch()

    def poll(self) -> list[StartRecord]:
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        new = []
        for line in lines:
            i, a, p, s, t = line.decode().split()
            new.append(StartRecord(int(i), int(a), int(p), float(s), float(t)))
        self.records.extend(new)
        return new

    def wait_for(self, pred: Callable[[StartRecord], bool], timeout: float) -> StartRecord:
        deadline = time.monotonic() + timeout
        while True:
            for r in self.records:
                if pred(r):
                    return r
            if time.monotonic() > deadline:
                raise TimeoutError("start record did not appear")
            time.sleep(0.002)
            self.poll()
