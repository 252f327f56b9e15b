"""One process-pool child as its worker sees it: the process, its two pipes, and its state.

Children are started with ``subprocess`` (fork+exec of ``python -m
tether._worker.processes.child``), not ``multiprocessing``, because:

* exec gives a clean interpreter: nothing of the multi-threaded worker (threads, held locks,
  store connections, sockets) is copied into it, which a plain fork would do unsafely;
* the ``spawn`` and ``forkserver`` contexts re-import the parent's ``__main__`` in each child
  (an unguarded ``app.run_worker()`` in a script then starts workers recursively) and pickle
  the process object; here only plain values (user data as JSON text) cross, on two pipes
  of our own (``wire``);
* signals, sessions and file descriptors are ours to set: the child gets its own session (a
  terminal's Ctrl-C reaches only the worker, which drains), and only its two pipe ends. Its
  session makes it the leader of its own process group, which the worker signals as a whole
  (``groups``): what a handler starts ends with the child.

The price is an interpreter start and the app's import per child (about 0.15 s), paid once per
child: children are started once and reused, and replaced only when one dies, is stopped, or
is recycled (``max_tasks_per_child``, ``max_memory_per_child``).

Invariants: a child's process group is signalled only until the child is reaped (its pid
may be another process's after that) and is SIGKILLed just before the child is reaped; what
the pool queues for a child reaches it in the order it was queued (:meth:`Child.post`), with
nothing encoded or written under the pool's lock.
"""

from __future__ import annotations

import enum
import os
import signal
import subprocess
import sys
import threading
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

from tether._worker.processes import groups, wire
from tether._worker.registry import Running
from tether.stores._contract import JobRecord

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TETHER_ROOT = str(Path(__file__).resolve().parents[3])  # holds the tether package


class State(enum.Enum):
    STARTING = "starting"  # spawned, has not said ready
    IDLE = "idle"
    BUSY = "busy"  # running ``entry`` and/or holding jobs sent ahead
    RETIRING = "retiring"  # recycled: its input is closed and it exits on its own
    DEAD = "dead"


@dataclass(eq=False)
class Child:
    proc: subprocess.Popen[bytes]
    writer: wire.Writer
    reader: wire.Reader
    state: State = State.STARTING
    entry: Running | None = None  # the attempt it runs (it said ``start``), at most one
    started_at: float = 0.0  # monotonic time ``entry`` started in the child
    ahead: deque[Running] = field(default_factory=deque)  # sent, not started, in order
    ahead_tasks: Counter[str] = field(default_factory=Counter)  # their task names, counted
    outbox: list[bytes | Running] = field(default_factory=list)  # queued, not yet written
    ahead_bytes: int = 0  # their run messages' size (bounded: the pipe never fills)
    withdrawn: dict[tuple[int, int], Running] = field(default_factory=dict)  # not acked yet
    assigned: int = 0  # attempts ever sent to it (max_tasks_per_child bounds this)
    jobs: int = 0  # attempts it has finished
    stop_why: str | None = None  # why the worker ended it (None: it died on its own)
    kill_at: float | None = None  # monotonic time of the SIGKILL that follows a SIGTERM
    killed: bool = False
    fatal: str | None = None  # why it could not load the app
    gone: threading.Event = field(default_factory=threading.Event, repr=False)  # reaped, ended
    reaped: bool = False  # its pid (its group's id) is no longer ours to signal
    _reaping: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def load(self) -> int:
        """Attempts it holds: the running one and those sent ahead."""
        return len(self.ahead) + (self.entry is not None)

    @property
    def live(self) -> bool:
        """Counts toward the pool's size: not retiring, not stopped, not dead."""
        return self.state in (State.STARTING, State.IDLE, State.BUSY) and self.stop_why is None

    def signal(self, sig: signal.Signals) -> None:
        """Signal the child's whole process group (the child and whatever its handlers
        started) unless the child has been reaped: its pid, the group's id, may then name
        another process (``groups``)."""
        with self._reaping:
            if not self.reaped:
                groups.kill_group(self.pid, sig)

    def reap(self, grace: float) -> int:
        """Wait for the exit status after end of file (SIGKILL if it lingers past ``grace``);
        then SIGKILL what is left of its group, before reaping it: a handler's subprocesses
        never outlive the child that ran them."""
        if not groups.wait_exited(self.pid, grace):
            self.signal(signal.SIGKILL)
            groups.wait_exited(self.pid, None)
        with self._reaping:
            if not self.reaped:
                groups.kill_group(self.pid, signal.SIGKILL)
            returncode = self.proc.wait()
            self.reaped = True
        return returncode

    def rss_mib(self) -> float | None:
        return rss_mib(self.pid)

    def send(self, lock: threading.Condition, header: wire.Header) -> None:
        """:meth:`post` one message (after what is already queued for it)."""
        self.post(lock, wire.encode(header))

    def post(self, lock: threading.Condition, data: bytes = b"") -> bool:
        """Write what the pool queued for this child (``outbox``: jobs and messages), then
        ``data``; False if its pipe is closed. Messages reach a child in the order they were
        queued under ``lock`` (the fleet's), yet nothing is encoded or written under it: the
        writer's lock is held from taking the outbox to the end of the write (never the other
        way round)."""

        def take() -> bytes:
            with lock:
                queued, self.outbox = self.outbox, []
            out: list[bytes] = []
            jobs: list[JobRecord] = []
            for item in queued:  # consecutive jobs: one ``runs`` message
                if isinstance(item, bytes):
                    if jobs:
                        out.append(wire.encode_runs(jobs))
                        jobs = []
                    out.append(item)
                else:
                    jobs.append(item.ctx.job)
            if jobs:
                out.append(wire.encode_runs(jobs))
            out.append(data)
            return b"".join(out)

        try:
            self.writer.flush(take)
        except OSError:
            return False
        return True


def spawn(init: wire.Header) -> Child:
    """Start a child and send it ``init``; its ``ready`` (or ``fatal``) comes on its pipe."""
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [_TETHER_ROOT, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tether._worker.processes.child", str(to_child_r),
             str(from_child_w), str(os.getpid())],
            pass_fds=(to_child_r, from_child_w), stdin=subprocess.DEVNULL, env=env,
            start_new_session=True)
    except BaseException:
        for fd in (to_child_r, to_child_w, from_child_r, from_child_w):
            os.close(fd)
        raise
    os.close(to_child_r)
    os.close(from_child_w)
    child = Child(proc, wire.Writer(to_child_w), wire.Reader(from_child_r))
    try:
        child.writer.send(init)
    except OSError:
        pass  # it died at once; its reader sees end of file and reports how
    return child


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "signal"
        return f"killed by signal {name} ({-returncode})"
    return f"exited with code {returncode}"


def rss_mib(pid: int) -> float | None:
    """Resident memory of ``pid`` in MiB from /proc/PID/statm; None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            resident = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return resident * _PAGE / (1024 * 1024)
