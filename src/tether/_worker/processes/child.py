"""A process-pool child: ``python -m tether._worker.processes.child FD_IN FD_OUT PARENT_PID``.

It imports the app by its ``MODULE:APP`` spec and runs the attempts its worker sends, one at a
time and in the order sent, on its main thread (``async def`` tasks on an event loop of its
own). Jobs sent ahead wait in a local queue (see ``ChildLoop``).

Invariants:

* It runs only what its parent sends, one attempt at a time, and never touches the store: the
  parent owns the lease, so checkpoint and progress values go to the parent, which makes the
  fenced store call and replies accepted or rejected (``current_job()`` works unchanged).
* It never outlives its parent, nor does anything its handlers started: it leads its own
  process group, and when its worker dies it SIGKILLs that group, itself included
  (``groups.watch_parent``: a thread blocked on a pidfd of the parent; and, for a handler
  that holds the GIL in a C call, ``groups.guard_group``: a forked process of the group that
  needs no GIL of ours), so a killed worker leaves no handler or subprocess running
  unfenced; end of file on its pipe ends it between attempts.
* Stopping it is the parent's decision, and the parent has already decided that attempt's
  outcome: it sends a ``stop`` message (the reason) and SIGTERM; the SIGTERM handler reads the
  reason, sets ``current_job().cancelled`` / ``stop_reason``, and raises SystemExit in the
  handler (``finally`` blocks run); the child then dies of the SIGTERM without reporting
  anything. SIGKILL follows if it does not.
* One thread reads the pipe at a time: the main thread between attempts, the thread waiting
  for a fenced write's reply during one (which hands on whatever else arrives). No reader
  thread: with jobs sent ahead, the child goes from one job to the next without sleeping.
* It writes once per job, before the handler starts: the outcomes it owes and ``start``. So
  the parent always knows which job was running when a child dies, and that the jobs after
  it never started. Recycling (``max_tasks_per_child``, ``max_memory_per_child``) is decided
  here between two jobs, since the parent cannot keep a queued job from starting.
* SIGINT is ignored: a terminal's Ctrl-C is the worker's to handle (it drains), and the child
  runs in its own session anyway.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Coroutine
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, cast

from tether import _clock as clock
from tether import _parents
from tether._appspec import load_runtime
from tether._context import JobContext, bind, follow_logs, unbind
from tether._errors import (
    Interrupted,
    JobCancelled,
    LeaseInterrupted,
    ShuttingDown,
    StoreError,
)
from tether._worker.outcome import decide, describe
from tether._worker.poolconfig import CHILD_ENV
from tether._worker.processes import groups, wire
from tether._worker.processes.children import rss_mib
from tether.stores._contract import Capabilities, Lease, Leases, Outcome

if TYPE_CHECKING:
    from tether._runtime import Runtime

log = logging.getLogger("tether.child")
_WHY: dict[str, type[Interrupted]] = {
    "JobCancelled": JobCancelled, "LeaseInterrupted": LeaseInterrupted,
    "ShuttingDown": ShuttingDown}
PARENT_GONE = groups.PARENT_GONE


class ParentLink:
    """What a JobContext in a child uses as its store: fenced writes, made by the parent.

    The request goes up the pipe and the requesting thread reads the pipe itself until the
    reply comes (the main thread runs the handler meanwhile, so nobody else is reading). A
    ``stop`` arriving first marks the attempt stopped (its SIGTERM follows).
    """

    kind = "process-pool child"
    capabilities = Capabilities(why_not=(
        "current_job().transaction() needs the worker's store connection, which a "
        "process-pool child does not have: run such tasks on a worker with pool='thread'"))

    def __init__(self, loop: ChildLoop) -> None:
        self._loop = loop
        self._seq = itertools.count(1)
        self._lock = threading.Lock()  # one request at a time, also from a handler's threads

    def save_checkpoint(self, lease: Lease, checkpoint: str, *, now: float | None = None) -> bool:
        return self._write("checkpoint", lease, checkpoint)

    def set_progress(self, lease: Lease, progress: str, *, now: float | None = None) -> bool:
        return self._write("progress", lease, progress)

    def read_parents(self, job_id: int) -> _parents.Parents:
        """A workflow step's parents (``current_job().parent_results()``, a ``pipe``): read
        by the worker from its store, sent back as JSON text (``tether._parents``)."""
        attempt = self._loop.current.attempt if self._loop.current is not None else 0
        reply, blobs = self._request({"op": "read", "what": "parents", "job": job_id,
                                      "attempt": attempt}, [])
        if reply.get("error") or not blobs or blobs[0] is None:
            raise StoreError(f"parents of job {job_id} not read: "
                             f"{reply.get('error') or 'no answer'}")
        return _parents.from_wire(blobs[0])

    def _write(self, what: str, lease: Lease, text: str) -> bool:
        reply, _ = self._request({"op": "write", "what": what, "job": lease.job_id,
                                  "attempt": lease.attempt}, [text])
        if reply.get("error"):
            raise StoreError(f"{what} not stored: {reply['error']}")
        return bool(reply.get("ok"))

    def _request(self, header: wire.Header, blobs: list[str | None]) -> wire.Message:
        """Send ``header`` to the worker and read the pipe until its reply comes."""
        loop = self._loop
        with self._lock:
            seq = next(self._seq)
            loop.writer.send({**header, "seq": seq}, blobs)
            while True:
                loop.reading = True
                try:
                    msg = loop.reader.read()
                finally:
                    loop.reading = False
                if msg is None:  # the parent is gone mid-attempt: never outlive it
                    groups.end_own_group()
                if msg[0]["op"] == "reply":
                    if msg[0].get("seq") == seq:
                        return msg
                else:  # a stop, or a job sent ahead (or withdrawn) meanwhile
                    loop.accept(msg)


class ChildLoop:
    """The main thread: take the next job of the local queue, report, run, repeat.

    The worker sends jobs ahead (``run``), so the child rarely waits for its parent between
    jobs. Before a handler starts, the child flushes, in ONE write, the outcomes it owes and a
    ``start`` message for that job: the worker always knows which job runs (a crash ends exactly
    that one as a stall; the jobs still queued here never ran and go back as released) and
    when it started (the hard timeout counts from there). Every ``withdraw`` already in the
    pipe is read before a job starts, so a withdrawn job never starts once its withdrawal has
    arrived; the worker learns which ones were skipped (``skipped``).
    """

    def __init__(self, runtime: Runtime, reader: wire.Reader, writer: wire.Writer,
                 limits: wire.Header | None = None, parent: int | None = None) -> None:
        self.runtime = runtime
        self.parent = os.getppid() if parent is None else parent
        self.reader = reader
        self.writer = writer
        self.link = ParentLink(self)
        self.current: JobContext | None = None
        self.reading = False  # a thread is inside reader.read()
        self.terminating = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pending: deque[wire.Message] = deque()  # jobs sent ahead, not started
        self.outbox: list[wire.Message] = []  # owed to the parent, flushed before a start
        limits = limits or {}
        self.max_tasks: int | None = limits.get("max_tasks")
        self.max_memory: float | None = limits.get("max_memory")
        self.jobs = 0
        self.retired: str | None = None

    def serve(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        follow_logs()  # records the handlers log carry their job
        while True:
            if not self.pending or self.retired is not None:
                self._flush()
                self.reading = True
                try:
                    msg = self.reader.read()
                finally:
                    self.reading = False
                if msg is None:
                    return 0
                self.accept(msg)
                continue
            self.reading = True
            try:  # withdrawals that already arrived take effect before the next start
                more = self.reader.read_ready()
            finally:
                self.reading = False
            for msg in more:
                self.accept(msg)
            if self.pending:
                self._run(*self.pending.popleft())

    def accept(self, msg: wire.Message) -> None:
        """A message that is not a fenced write's reply (any thread reading the pipe)."""
        header = msg[0]
        op = header["op"]
        if op == "run":
            self.pending.append(msg)
        elif op == "runs":
            self.pending.extend(wire.split_runs(*msg))
        elif op == "withdraw":
            key = (header.get("job"), header.get("attempt"))
            for queued in self.pending:
                if wire.run_key(queued[0]) == key:
                    self.pending.remove(queued)
                    self.outbox.append(({"op": "skipped", "job": key[0], "attempt": key[1]},
                                        []))
                    break
        elif op == "stop":
            self.stopping(str(header.get("why")))
        # a reply left over from an attempt that is over: nothing to do

    def _flush(self) -> None:
        if self.outbox:
            out, self.outbox = self.outbox, []
            self.writer.send_many(out)

    def _retire_why(self) -> str | None:
        """Recycling is decided here, between jobs: the parent cannot stop a job sent ahead
        from starting right after the one before."""
        if self.max_tasks is not None and self.jobs >= self.max_tasks:
            return f"recycled after {self.jobs} job(s) (max_tasks_per_child)"
        if self.max_memory is not None:
            rss = rss_mib(os.getpid())
            if rss is not None and rss > self.max_memory:
                return (f"recycled: RSS {rss:.0f} MiB over max_memory_per_child "
                        f"({self.max_memory:g} MiB)")
        return None

    def stopping(self, why: str) -> None:
        ctx = self.current
        if ctx is not None:
            ctx.interrupt(_WHY.get(why, ShuttingDown))

    def _on_term(self, signum: int, _frame: FrameType | None) -> NoReturn:
        """The worker stopped this attempt: learn why (the ``stop`` message it sent first is
        in the pipe, unless a thread is reading it right now), mark the attempt, and unwind the
        handler with SystemExit so its ``finally`` blocks run; the process then exits.
        A SIGTERM that finds the worker gone (from someone else: the worker can no longer
        send one) ends the whole group at once, as nobody is left to."""
        if groups.orphaned(self.parent):
            groups.end_own_group()
        self.terminating = True
        if not self.reading:
            try:
                while (msg := self.reader.read_nowait()) is not None:
                    if msg[0]["op"] == "stop":
                        self.stopping(str(msg[0].get("why")))
            except (OSError, ValueError, wire.ProtocolError):
                pass
        self.stopping("ShuttingDown")  # no-op when a reason was already set
        raise SystemExit(128 + signum)

    # -- running -----------------------------------------------------------------------------
    def _run(self, header: wire.Header, blobs: list[str | None]) -> None:
        job = wire.job_of(header, blobs)
        ctx = JobContext(job, cast(Leases, self.link), self.runtime.codec,
                         self.runtime.registry.reading_task)
        start = [job.id, job.attempt, clock.monotonic()]
        if self.outbox and self.outbox[-1][0]["op"] == "outcome":
            self.outbox[-1][0]["start"] = start  # one header for both: one parse, one lock
        else:
            self.outbox.append(({"op": "start", "start": start}, []))
        self._flush()
        self.current = ctx
        task = self.runtime.registry.find_task(job.task)
        outcome: Outcome | None
        if task is None:
            outcome = Outcome(ctx.lease, "dead", reason="unknown_task", error=(
                f"no task named {job.task!r} in the app the child imported"))
        else:
            token = bind(ctx)
            try:
                args, kwargs = task.arguments(job.payload, ctx)
                if task.is_async:
                    result = self._run_async(task.func(*args, **kwargs))
                else:
                    result = task.func(*args, **kwargs)
            except BaseException as exc:  # the handler's failure is data, not our crash
                if self.terminating:
                    raise
                outcome = self._decide(ctx, task, None, exc)
            else:
                outcome = self._decide(ctx, task, result, None)
            finally:
                unbind(token)
        self.current = None
        if self.terminating:  # stopped (a handler that swallowed the SystemExit): report nothing
            raise SystemExit(128 + signal.SIGTERM)
        message = wire.outcome_message(ctx.lease, outcome)
        message[0]["took"] = clock.monotonic() - start[2]  # the handler alone (``sendahead``)
        self.outbox.append(message)
        self.jobs += 1
        why = self._retire_why()
        if why is not None:  # nothing more starts here; the worker takes back what is queued
            self.retired = why
            self.pending.clear()
            self.outbox.append(({"op": "retire", "why": why}, []))

    def _decide(self, ctx: JobContext, task: Any, result: Any,
                exc: BaseException | None) -> Outcome | None:
        try:
            return decide(ctx, task, result, exc)
        except BaseException as err:  # e.g. a result JSON cannot carry; never our own stop
            if self.terminating:
                raise
            return decide(ctx, task, None, err)

    def _run_async(self, coro: Coroutine[Any, Any, Any]) -> Any:
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
        return self.loop.run_until_complete(coro)


def main(argv: list[str] | None = None) -> int:
    fd_in, fd_out, parent = (int(x) for x in (argv or sys.argv[1:])[:3])
    os.environ[CHILD_ENV] = str(os.getpid())
    groups.guard_group(parent)  # first: the fork must copy a process of one thread
    groups.watch_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for fd in (fd_in, fd_out):
        os.set_inheritable(fd, False)  # a handler's own subprocesses must not hold our pipes
    reader, writer = wire.Reader(fd_in), wire.Writer(fd_out)
    first = reader.read()
    if first is None or first[0]["op"] != "init":
        return PARENT_GONE
    init = first[0]
    sys.path[:] = list(dict.fromkeys([*init["sys_path"], *sys.path]))
    logging.basicConfig(level=init.get("log_level", "INFO"), stream=sys.stderr, format=(
        "%(asctime)s %(levelname)s %(name)s [child %(process)d]: %(message)s"))
    try:
        runtime = load_runtime(init["spec"])
        if init.get("url"):  # the worker's store (--url), not the one the module names
            runtime.url = init["url"]
        runtime.registry.import_includes()
    except BaseException as exc:
        writer.send({"op": "fatal", "error": f"cannot load {init['spec']!r}: {describe(exc)}"})
        return 2
    writer.send({"op": "ready", "pid": os.getpid(), "tasks": sorted(runtime.registry.tasks)})
    child = ChildLoop(runtime, reader, writer, init.get("limits"), parent)
    try:
        code = child.serve()
        if groups.orphaned(parent):  # end of file because the worker died
            groups.end_own_group()
        return code
    except SystemExit:
        if not child.terminating:
            raise
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        # Stopped: die of the SIGTERM (the worker logs "killed by signal SIGTERM"), skipping
        # interpreter teardown, which a handler's own threads could otherwise hold up.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        os._exit(128 + signal.SIGTERM)


if __name__ == "__main__":
    sys.exit(main())
