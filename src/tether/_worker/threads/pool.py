"""The executor: runs handlers and turns how they ended into an outcome.

Plain functions run on a pool of daemon threads (a handler that never returns cannot hold the
process open at exit); ``async def`` handlers run on one event loop thread. Both share the
worker's slots: a handler thread takes the oldest claimed job from the registry's backlog when
a slot is free (``Registry.take``), runs a sync handler itself and hands an async one to the
loop, so a job goes from the fetcher to the thread that runs it in one hand-off.

Exactly one outcome is decided per attempt (``Registry.settle_once``): the
handler's end, its timeout, or a forced shutdown, whichever comes first.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import traceback
from collections.abc import Callable
from typing import Any

from tether import _clock as clock
from tether import _text as text
from tether._context import JobContext, bind, unbind
from tether._errors import (
    Fail,
    Interrupted,
    JobCancelled,
    LeaseInterrupted,
    Retry,
    ShuttingDown,
)
from tether._task import BadArguments, Task
from tether._worker.registry import Registry, Running
from tether.stores._contract import Outcome

log = logging.getLogger("tether.executor")
_LOOP_LOCK = threading.Lock()  # handler threads may start the async loop concurrently


def describe(exc: BaseException) -> str:
    """The error text of an attempt: the exception, then the tail of its traceback, cleaned
    by :func:`tether._text.clean_error` here so that what the worker logs and emits is exactly
    what every store keeps (no NUL, no lone surrogate, at most ``text.MAX_ERROR``)."""
    tb = "".join(traceback.format_exception(exc)).strip()
    head = text.clean_error(f"{type(exc).__name__}: {exc}", text.MAX_ERROR // 2)
    tail = text.clean_error(tb)
    if len(tail) <= len(head):
        return head
    return text.clean_error(head + "\n" + tail[-(text.MAX_ERROR - len(head) - 1):])


class Executor:
    def __init__(
        self,
        registry: Registry,
        settle: Callable[[Running, Outcome | None], None],
        concurrency: int,
        *,
        on_start: Callable[[Running, Task[Any, Any]], None] | None = None,
        on_return: Callable[[float], None] | None = None,
    ) -> None:
        self.registry = registry
        self._settle = settle
        self._on_start = on_start
        self._on_return = on_return
        self._threads = [
            threading.Thread(target=self._thread_main, name=f"tether-handler-{i}", daemon=True)
            for i in range(concurrency)
        ]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self.registry.close()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)

    def submit(self, entry: Running, task: Task[Any, Any]) -> None:
        """Queue a claimed job; a handler thread starts it when a slot is free."""
        entry.task = task
        self.registry.queue([entry], 1)

    # -- sync ------------------------------------------------------------------------------
    def _thread_main(self) -> None:
        first = True
        done: Running | None = None  # marked returned by the next take, under its lock
        while True:
            entry = self.registry.take(first, done)
            first, done = False, None
            if entry is None:
                return
            task = entry.task
            assert isinstance(task, Task)
            if self._on_start is not None:
                self._on_start(entry, task)
            if task.is_async:
                loop = self._ensure_loop()
                entry.loop = loop
                asyncio.run_coroutine_threadsafe(self._run_async(entry, task), loop)
                continue
            token = bind(entry.ctx)
            try:
                entry.ctx.check_cancelled()  # interrupted while it waited for a slot
                args, kwargs = task.arguments(entry.ctx.job.payload)
                result: Any = task.func(*args, **kwargs)
            except BaseException as exc:  # the handler's failure is data, not our crash
                self._finish(entry, task, None, exc, mark=False)
            else:
                self._finish(entry, task, result, None, mark=False)
            finally:
                unbind(token)
                done = entry

    # -- async -----------------------------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with _LOOP_LOCK:
            return self._make_loop()

    def _make_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(
                target=loop.run_forever, name="tether-asyncio", daemon=True
            )
            self._loop = loop
            self._loop_thread.start()
        return self._loop

    async def _run_async(self, entry: Running, task: Task[Any, Any]) -> None:
        entry.async_task = asyncio.current_task()
        token = bind(entry.ctx)
        try:
            if entry.ctx.cancelled:  # interrupted before it could start
                raise asyncio.CancelledError
            args, kwargs = task.arguments(entry.ctx.job.payload)
            result = await task.func(*args, **kwargs)
        except asyncio.CancelledError as exc:
            self._finish(entry, task, None, exc)
        except BaseException as exc:
            self._finish(entry, task, None, exc)
        else:
            self._finish(entry, task, result, None)
        finally:
            unbind(token)

    # -- outcome ---------------------------------------------------------------------------
    def _finish(self, entry: Running, task: Task[Any, Any], result: Any,
                exc: BaseException | None, *, mark: bool = True) -> None:
        """Settle the attempt; never raises, and frees the slot (a handler thread that died
        here would leak a slot for good): here, or (``mark=False``, a handler thread) in its
        next ``Registry.take``, which it reaches whatever happens here."""
        if self._on_return is not None:
            self._on_return(clock.monotonic() - entry.started_at)
        try:
            try:
                outcome = self.outcome(entry, task, result, exc)
            except Exception as err:  # e.g. Retry(delay="soon"): still one clear outcome
                outcome = Outcome(entry.lease, "error", error=describe(err), reason="error")
            if entry.ctx.completed_in_transaction:
                outcome = None
            if self.registry.settle_once(entry):
                self._settle(entry, outcome)
        except Exception:
            log.critical("could not settle job %s attempt %s", entry.ctx.id, entry.ctx.attempt,
                         exc_info=True)
        finally:
            if mark:
                self.registry.mark(entry, returned=True)

    def outcome(
        self, entry: Running, task: Task[Any, Any], result: Any, exc: BaseException | None
    ) -> Outcome | None:
        return decide(entry.ctx, task, result, exc)


def decide(ctx: JobContext, task: Task[Any, Any], result: Any,
           exc: BaseException | None) -> Outcome | None:
    """The outcome of an attempt whose handler returned ``result`` or raised ``exc``.

    Shared by the thread executor and the process-pool child, so both pools end attempts alike.

    A result the store cannot hold, and arguments that do not fit the function
    (:class:`~tether._task.BadArguments`), fail the job at once: running the handler again
    cannot fix either, and re-running it would repeat its side effects for nothing.
    """
    lease = ctx.lease
    why = ctx.stop_reason
    if exc is None:
        if result is None:  # most handlers return nothing: no encoder call for it
            return Outcome(lease, "done", result="null")
        try:
            value = task.encode_result(result)
        except TypeError as err:
            return Outcome(lease, "dead", error=describe(err), reason="bad_result")
        return Outcome(lease, "done", result=value)
    if isinstance(exc, BadArguments):
        return Outcome(lease, "dead", error=describe(exc), reason="bad_arguments")
    if isinstance(exc, (asyncio.CancelledError, Interrupted)):
        if why == "JobCancelled" or isinstance(exc, JobCancelled):
            return Outcome(lease, "cancelled", error="cancelled on request")
        if why == "ShuttingDown" or isinstance(exc, ShuttingDown):
            return Outcome(lease, "released")
        if why == "LeaseInterrupted" or isinstance(exc, LeaseInterrupted):
            return None  # nothing to write: the lease is gone, the fence would reject it
        return Outcome(lease, "error", error=describe(exc), reason="error",
                       retry_delay=task.config.retry.delay(ctx.job.failures + 1))
    if isinstance(exc, Fail):
        return Outcome(lease, "dead", error=describe(exc), reason="error")
    delay = task.config.retry.delay(ctx.job.failures + 1)
    if isinstance(exc, Retry) and exc.delay is not None:
        delay = max(0.0, exc.delay)
    if not isinstance(exc, Exception):  # SystemExit, KeyboardInterrupt in a handler
        log.error("job %s raised %s", ctx.id, type(exc).__name__)
    return Outcome(lease, "error", error=describe(exc), reason="error", retry_delay=delay)
