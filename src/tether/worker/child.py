"""A process-pool child: ``python -m tether.worker.child FD_IN FD_OUT PARENT_PID``.

It imports the app by its ``MODULE:APP`` spec and runs the attempts its worker sends, one at a
time, on its main thread (``async def`` tasks on an event loop of its own).

Invariants:

* It runs only what its parent sends, one attempt at a time, and never touches the store: the
  parent owns the lease, so checkpoint and progress values go to the parent, which makes the
  fenced store call and replies accepted or rejected (``current_job()`` works unchanged).
* It never outlives its parent: PR_SET_PDEATHSIG (Linux) kills it with its worker, so a killed
  worker leaves no handler running unfenced; end of file on its pipe ends it between attempts.
* Stopping it is the parent's decision, and the parent has already decided that attempt's
  outcome: it sends a ``stop`` message (the reason) and SIGTERM; the SIGTERM handler reads the
  reason, sets ``current_job().cancelled`` / ``stop_reason``, and raises SystemExit in the
  handler (``finally`` blocks run); the child then dies of the SIGTERM without reporting
  anything. SIGKILL follows if it does not.
* One thread reads the pipe at a time: the main thread between attempts, the thread waiting
  for a fenced write's reply during one. No reader thread: a job costs one wake-up here.
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
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, NoReturn, cast

from tether.app import App
from tether.context import JobContext, bind, unbind
from tether.errors import (
    ConfigError,
    Interrupted,
    JobCancelled,
    LeaseInterrupted,
    ShuttingDown,
    StoreError,
)
from tether.stores.base import Lease, Outcome, Store
from tether.worker import wire
from tether.worker.appspec import load_app
from tether.worker.executor import decide, describe
from tether.worker.poolconfig import CHILD_ENV

log = logging.getLogger("tether.child")
_WHY: dict[str, type[Interrupted]] = {
    "JobCancelled": JobCancelled, "LeaseInterrupted": LeaseInterrupted,
    "ShuttingDown": ShuttingDown}
PARENT_GONE = 70


class ParentLink:
    """What a JobContext in a child uses as its store: fenced writes, made by the parent.

    The request goes up the pipe and the requesting thread reads the pipe itself until the
    reply comes (the main thread runs the handler meanwhile, so nobody else is reading). A
    ``stop`` arriving first marks the attempt stopped (its SIGTERM follows).
    """

    kind = "process-pool child"

    def __init__(self, loop: ChildLoop) -> None:
        self._loop = loop
        self._seq = itertools.count(1)
        self._lock = threading.Lock()  # one request at a time, also from a handler's threads

    def save_checkpoint(self, lease: Lease, checkpoint: str, *, now: float | None = None) -> bool:
        return self._write("checkpoint", lease, checkpoint)

    def set_progress(self, lease: Lease, progress: str, *, now: float | None = None) -> bool:
        return self._write("progress", lease, progress)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        raise ConfigError(
            "current_job().transaction() needs the worker's store connection, which a "
            "process-pool child does not have: run such tasks on a worker with pool='thread'")
        yield  # pragma: no cover

    def _write(self, what: str, lease: Lease, text: str) -> bool:
        loop = self._loop
        with self._lock:
            seq = next(self._seq)
            loop.writer.send({"op": "write", "seq": seq, "what": what, "job": lease.job_id,
                              "attempt": lease.attempt}, [text])
            while True:
                loop.reading = True
                try:
                    msg = loop.reader.read()
                finally:
                    loop.reading = False
                if msg is None:
                    os._exit(PARENT_GONE)  # the parent is gone mid-attempt: never outlive it
                reply = msg[0]
                if reply["op"] == "stop":
                    loop.stopping(str(reply.get("why")))
                elif reply["op"] == "reply" and reply.get("seq") == seq:
                    break
        if reply.get("error"):
            raise StoreError(f"{what} not stored: {reply['error']}")
        return bool(reply.get("ok"))


class ChildLoop:
    """The main thread: read a message, run the attempt it names, report, repeat."""

    def __init__(self, app: App, reader: wire.Reader, writer: wire.Writer) -> None:
        self.app = app
        self.reader = reader
        self.writer = writer
        self.link = ParentLink(self)
        self.current: JobContext | None = None
        self.reading = False  # a thread is inside reader.read()
        self.terminating = False
        self.loop: asyncio.AbstractEventLoop | None = None

    def serve(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        while True:
            self.reading = True
            try:
                msg = self.reader.read()
            finally:
                self.reading = False
            if msg is None:
                return 0
            if msg[0]["op"] == "run":
                self._run(*msg)
            # a stop or reply left over from an attempt that is over: nothing to do

    def stopping(self, why: str) -> None:
        ctx = self.current
        if ctx is not None:
            ctx.interrupt(_WHY.get(why, ShuttingDown))

    def _on_term(self, signum: int, _frame: FrameType | None) -> NoReturn:
        """The worker stopped this attempt: learn why (the ``stop`` message it sent first is
        in the pipe, unless a thread is reading it right now), mark the attempt, and unwind the
        handler with SystemExit so its ``finally`` blocks run; the process then exits."""
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
        ctx = JobContext(job, cast(Store, self.link))
        self.current = ctx
        task = self.app.tasks.get(job.task)
        outcome: Outcome | None
        if task is None:
            outcome = Outcome(ctx.lease, "dead", reason="unknown_task", error=(
                f"no task named {job.task!r} in the app the child imported"))
        else:
            token = bind(ctx)
            try:
                args, kwargs = task.arguments(job.payload)
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
        self.writer.send(*wire.outcome_message(ctx.lease, outcome))

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


def _die_with_parent(parent: int) -> None:
    """Ask the kernel to SIGKILL us when the parent dies (Linux); exit if it already has."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover - exotic libc
            pass
    if os.getppid() != parent:
        os._exit(PARENT_GONE)


def main(argv: list[str] | None = None) -> int:
    fd_in, fd_out, parent = (int(x) for x in (argv or sys.argv[1:])[:3])
    os.environ[CHILD_ENV] = str(os.getpid())
    _die_with_parent(parent)
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
        app = load_app(init["spec"])
    except BaseException as exc:
        writer.send({"op": "fatal", "error": f"cannot load {init['spec']!r}: {describe(exc)}"})
        return 2
    writer.send({"op": "ready", "pid": os.getpid(), "tasks": sorted(app.tasks)})
    child = ChildLoop(app, reader, writer)
    try:
        return child.serve()
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
