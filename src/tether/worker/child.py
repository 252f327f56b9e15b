"""A process-pool child: ``python -m tether.worker.child FD_IN FD_OUT PARENT_PID``.

It imports the app by its ``MODULE:APP`` spec and runs the attempts its worker sends, one at a
time, on its main thread (``async def`` tasks on an event loop of its own).

Invariants:

* It runs only what its parent sends, one attempt at a time, and never touches the store: the
  parent owns the lease, so checkpoint and progress values go to the parent, which makes the
  fenced store call and replies accepted or rejected (``current_job()`` works unchanged).
* It never outlives its parent: PR_SET_PDEATHSIG (Linux) and end of file on its pipe while an
  attempt runs both end it, so a killed worker leaves no handler running unfenced.
* Stopping it is the parent's decision, and the parent has already decided that attempt's
  outcome: a ``stop`` message sets ``current_job().cancelled`` (and cancels an async handler),
  the SIGTERM that follows raises SystemExit in the handler (``finally`` blocks run), and the
  child exits without reporting anything; SIGKILL follows if it does not.
* SIGINT is ignored: a terminal's Ctrl-C is the worker's to handle (it drains), and the child
  runs in its own session anyway.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import queue
import signal
import sys
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, NoReturn, cast

from tether import payload
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
    """What a JobContext in a child uses as its store: fenced writes, made by the parent."""

    kind = "process-pool child"

    def __init__(self, writer: wire.Writer) -> None:
        self._writer = writer
        self._seq = itertools.count(1)
        self._replies: dict[int, wire.Header] = {}
        self._cond = threading.Condition()

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
        seq = next(self._seq)
        self._writer.send({"op": "write", "seq": seq, "what": what, "job": lease.job_id,
                           "attempt": lease.attempt}, [text])
        with self._cond:
            self._cond.wait_for(lambda: seq in self._replies)
            reply = self._replies.pop(seq)
        if reply.get("error"):
            raise StoreError(f"{what} not stored: {reply['error']}")
        return bool(reply.get("ok"))

    def deliver(self, reply: wire.Header) -> None:
        with self._cond:
            self._replies[int(reply["seq"])] = reply
            self._cond.notify_all()


class ChildLoop:
    def __init__(self, app: App, reader: wire.Reader, writer: wire.Writer) -> None:
        self.app = app
        self.reader = reader
        self.writer = writer
        self.link = ParentLink(writer)
        self.jobs: queue.SimpleQueue[wire.Message | None] = queue.SimpleQueue()
        self.current: JobContext | None = None
        self.busy = False
        self.terminating = False
        self.stop_why: type[Interrupted] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.async_task: asyncio.Task[Any] | None = None

    def serve(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        threading.Thread(target=self._read_loop, name="tether-child-reader", daemon=True).start()
        while True:
            item = self.jobs.get()
            if item is None:
                return 0
            self._run(*item)

    # -- messages from the parent ------------------------------------------------------------
    def _read_loop(self) -> None:
        while True:
            try:
                msg = self.reader.read()
            except (OSError, ValueError, wire.ProtocolError):
                msg = None
            if msg is None:
                if self.busy:  # the parent is gone while a handler runs: never outlive it
                    os._exit(PARENT_GONE)
                self.jobs.put(None)
                return
            header = msg[0]
            op = header["op"]
            if op == "run":
                self.busy = True
                self.jobs.put(msg)
            elif op == "reply":
                self.link.deliver(header)
            elif op == "stop":
                self._stop(_WHY.get(str(header.get("why")), ShuttingDown))

    def _stop(self, why: type[Interrupted]) -> None:
        self.stop_why = why
        ctx, task, loop = self.current, self.async_task, self.loop
        if ctx is not None:
            ctx.interrupt(why)
        if task is not None and loop is not None:
            loop.call_soon_threadsafe(task.cancel)

    def _on_term(self, signum: int, _frame: FrameType | None) -> NoReturn:
        self.terminating = True
        if self.current is not None:
            self.current.interrupt(self.stop_why or ShuttingDown)
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
                args, kwargs = payload.decode_call(job.payload)
                if task.is_async:
                    result = self._run_async(task.func(*args, **kwargs))
                else:
                    result = task.func(*args, **kwargs)
            except BaseException as exc:  # the handler's failure is data, not our crash
                if self.terminating:
                    raise
                outcome = _decide(ctx, task, None, exc)
            else:
                outcome = _decide(ctx, task, result, None)
            finally:
                unbind(token)
        self.current = None
        self.busy = False
        self.writer.send(*wire.outcome_message(ctx.lease, outcome))

    def _run_async(self, coro: Coroutine[Any, Any, Any]) -> Any:
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
        task = self.loop.create_task(coro)
        self.async_task = task
        try:
            if self.current is not None and self.current.cancelled:
                task.cancel()
            return self.loop.run_until_complete(task)
        finally:
            self.async_task = None


def _decide(ctx: JobContext, task: Any, result: Any, exc: BaseException | None) -> Outcome | None:
    try:
        return decide(ctx, task, result, exc)
    except BaseException as err:  # e.g. a result JSON cannot carry
        return decide(ctx, task, None, err)


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
