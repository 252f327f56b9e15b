"""How an attempt's end becomes its outcome, the same in both pools.

Invariant: a handler's return value or exception maps to exactly one :class:`Outcome` (or to
none, when the lease is gone and the fence would reject any write), by the same rules whether
the handler ran on a worker thread (``threads/pool.py``) or in a process-pool child
(``processes/child.py``): both import :func:`decide` from here, so the two pools cannot drift
apart in what they write.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from typing import Any

from tether import _text as text
from tether._context import JobContext
from tether._errors import (
    Fail,
    Interrupted,
    JobCancelled,
    LeaseInterrupted,
    Retry,
    ShuttingDown,
    Snooze,
)
from tether._task import BadArguments, Task
from tether.stores._contract import Outcome
from tether.stores._records import done_outcome

log = logging.getLogger("tether.executor")


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


def decide(ctx: JobContext, task: Task[Any, Any], result: Any,
           exc: BaseException | None) -> Outcome | None:
    """The outcome of an attempt whose handler returned ``result`` or raised ``exc``.

    A result the store cannot hold, and arguments that do not fit the function
    (:class:`~tether._task.BadArguments`), fail the job at once: running the handler again
    cannot fix either, and re-running it would repeat its side effects for nothing.
    """
    lease = ctx.lease
    why = ctx.stop_reason
    if exc is None:
        if result is None:  # most handlers return nothing: no encoder call for it
            return done_outcome(lease)
        try:
            value = task.encode_result(result)
        except TypeError as err:
            return Outcome(lease, "dead", error=describe(err), reason="bad_result")
        return done_outcome(lease, value)
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
    if isinstance(exc, Snooze):  # not a failure: no traceback, no attempt used
        return Outcome(lease, "snoozed", error=text.clean_error(exc.describe()),
                       retry_delay=exc.seconds)
    delay = task.config.retry.delay(ctx.job.failures + 1)
    if isinstance(exc, Retry) and exc.delay is not None:
        delay = max(0.0, exc.delay)
    if not isinstance(exc, Exception):  # SystemExit, KeyboardInterrupt in a handler
        log.error("job %s raised %s", ctx.id, type(exc).__name__)
    return Outcome(lease, "error", error=describe(exc), reason="error", retry_delay=delay)
