"""Every log record emitted inside a handler carries its job: ``job_id``, ``task``,
``attempt`` and ``queue`` (issue #24).

Invariant: **a record created while a handler runs has the four attributes of that
attempt; a record created anywhere else is left exactly as logging made it, and a caller's
own ``extra`` always wins.**

Why a log record factory and not a filter or a formatter: task code logs through loggers and
handlers tether never sees (``logging.getLogger(__name__)``, a handler added by the
application after the worker started, a ``QueueHandler`` formatting in another thread). The
factory runs in the logging call itself, in the handler's thread and context, for every
logger; a filter only runs on the handlers it was added to, and a formatter may run after the
context is gone. The factory chains the one installed before it, so other libraries' factories
keep working.

Why the record's ``__dict__`` becomes a :class:`_JobFields`: ``Logger.makeRecord`` refuses an
``extra`` key already present on the record (``KeyError: Attempt to overwrite``). Task code
that passes ``extra={"queue": ...}`` (a common word) must not start failing because tether
added a field; ``_JobFields`` hides the four names from that check only, so the caller's value
replaces tether's.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from typing import Any, Protocol

__all__ = ["FIELDS", "install"]

#: The attributes a record created inside a handler carries.
FIELDS = ("job_id", "task", "attempt", "queue")
_FIELD_SET = frozenset(FIELDS)

_lock = threading.Lock()
#: The context variable the installed factory reads (empty until the first install).
_installed: list[contextvars.ContextVar[Any]] = []


class _Job(Protocol):
    @property
    def id(self) -> int: ...

    @property
    def task(self) -> str: ...

    @property
    def attempt(self) -> int: ...

    @property
    def queue(self) -> str: ...


class _JobFields(dict[str, Any]):
    """A record's ``__dict__`` whose job fields an ``extra`` may replace (module doc)."""

    __slots__ = ()

    def __contains__(self, key: object) -> bool:
        return key not in _FIELD_SET and dict.__contains__(self, key)


def install(current: contextvars.ContextVar[Any]) -> None:
    """Make every record created while ``current`` holds a job context carry its fields.

    Idempotent and cheap to call again (the worker calls it as each attempt binds its
    context, so a process-pool child and a worker started from Python are covered alike)."""
    if _installed and _installed[0] is current:
        return
    with _lock:
        if _installed and _installed[0] is current:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            ctx = current.get(None)
            if ctx is not None:
                job: _Job = ctx
                fields = record.__dict__
                fields["job_id"] = job.id
                fields["task"] = job.task
                fields["attempt"] = job.attempt
                fields["queue"] = job.queue
                record.__dict__ = _JobFields(fields)
            return record

        logging.setLogRecordFactory(factory)
        _installed[:] = [current]
