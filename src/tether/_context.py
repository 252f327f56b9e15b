"""``current_job()``: what a running handler knows about its own attempt.

The context is the handler's view of its lease. Writes it makes (checkpoint, progress,
transactional completion) are fenced by the lease in the store, and the flags here are how the
worker's side loops (heartbeater, deadlines, shutdown) tell a handler to stop: async handlers
are cancelled outright, sync handlers see ``cancelled`` become true and ``check_cancelled()``
raise.
"""

from __future__ import annotations

import contextvars
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from tether import _logcontext
from tether import _parents as parents_of
from tether._codec import DEFAULT_CODEC, Codec, from_text, to_text
from tether._errors import (
    ConfigError,
    Interrupted,
    JobCancelled,
    LeaseInterrupted,
    LeaseLost,
    ShuttingDown,
    TetherError,
)
from tether.stores._contract import JobRecord, Lease, Leases, Outcome, transactional_finish

_current: contextvars.ContextVar[JobContext] = contextvars.ContextVar("tether_current_job")
_EVENTS = threading.Lock()  # guards the lazy Event of every context; taken rarely and briefly


class JobContext:
    """One attempt of one job, as its handler sees it. ``dedup_key`` names it."""

    # The per-attempt state starts as these class-level defaults and is set on the instance
    # only when it changes (most attempts never do): the worker builds one context per
    # claimed job on its fetcher thread, so __init__ stores only what differs per job.
    _parents: parents_of.Parents | None = None  # read once per attempt
    # A flag, and an Event only for handlers that actually wait(): building an Event (a
    # Condition and a Lock) for every job cost ~5 % of a draining worker's CPU.
    _stopped = False
    _event: threading.Event | None = None
    _why: type[Interrupted] | None = None
    completed_in_transaction = False

    def __init__(self, job: JobRecord, store: Leases, codec: Codec = DEFAULT_CODEC,
                 tasks: Callable[[str], Any] | None = None) -> None:
        self.job = job
        self.codec = codec
        self.lease: Lease = job.lease
        self._store = store
        #: Finds a task by name (the runtime's registry): a parent's result is decoded by its
        #: task's return annotation. None: plain JSON through the codec.
        self._tasks = tasks

    # -- identity ------------------------------------------------------------------------
    @property
    def id(self) -> int:
        return self.job.id

    @property
    def attempt(self) -> int:
        return self.job.attempt

    @property
    def queue(self) -> str:
        return self.job.queue

    @property
    def task(self) -> str:
        return self.job.task

    @property
    def uid(self) -> str:
        """The job's random id, drawn at enqueue and never reused (ids can be: see Job.uid)."""
        return self.job.uid

    @property
    def dedup_key(self) -> str:
        """``"<id>:<attempt>:<uid>"``: unique per attempt; use it to make side effects
        idempotent. ``(id, attempt)`` alone can name two jobs once a store handed an id out
        again after losing rows (a failover to an asynchronous standby, a Redis restart
        without persistence); the job's ``uid`` never repeats. Split it with
        ``key.split(":", 2)``."""
        return f"{self.job.id}:{self.job.attempt}:{self.job.uid}"

    @property
    def scheduled_at(self) -> datetime | None:
        """The tick a periodic schedule enqueued this job for (UTC), else None."""
        from tether._periodic import tick_of

        tick = tick_of(self.job.payload)
        return None if tick is None else datetime.fromtimestamp(tick, UTC)

    @property
    def checkpoint(self) -> Any:
        """What an earlier attempt (or this one) saved with ``save_checkpoint``; None if none."""
        return from_text(self.codec, self.job.checkpoint)

    @property
    def progress(self) -> Any:
        return from_text(self.codec, self.job.progress)

    # -- workflows -----------------------------------------------------------------------
    def _read_parents(self) -> parents_of.Parents:
        if self._parents is None:
            self._parents = parents_of.read(self._store, self.job.id)
        return self._parents

    @property
    def parents(self) -> tuple[int, ...]:
        """The ids this job was enqueued ``after`` (in that order); () for a job without.
        Read from the store at first use in the attempt, like :meth:`parent_results`."""
        return self._read_parents().ids

    def parent_results(self) -> list[Any]:
        """Each parent's result, in ``after`` order, decoded by its task's return annotation
        when this worker knows the task; None for a parent that did not end ``done`` (with
        ``allow_failure``) or is gone. One store read for all of them, at the first call."""
        out: list[Any] = []
        for parent in self._read_parents().outcomes:
            if parent.status != "done" or parent.result is None:
                out.append(None)
                continue
            task = self._tasks(parent.task) if self._tasks and parent.task else None
            value = json.loads(parent.result)
            out.append(task.decode_result(value) if task is not None
                       else self.codec.decode(value, Any))
        return out

    def piped(self, pipe: str) -> Any:
        """What a workflow step is given first (its payload's ``pipe``): ``one``, the first
        parent's result; ``all``, the list of every parent's result. Plain JSON: the step's
        own parameter annotation decodes it, as any argument."""
        values = [json.loads(p.result) if p.status == "done" and p.result is not None
                  else None for p in self._read_parents().outcomes]
        if pipe == "all":
            return values
        return values[0] if values else None

    # -- stopping ------------------------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        """True once the handler should stop: cancel requested, lease lost, timeout, shutdown."""
        return self._stopped

    @property
    def stop_reason(self) -> str | None:
        return None if self._why is None else self._why.__name__

    def interrupt(self, why: type[Interrupted]) -> None:
        with _EVENTS:
            if self._why is None:
                self._why = why
            self._stopped = True
            event = self._event
        if event is not None:
            event.set()

    def check_cancelled(self) -> None:
        """Raise the matching :class:`~tether._errors.Interrupted` if the handler must stop."""
        if self._stopped:
            why = self._why or JobCancelled
            messages = {
                JobCancelled: "cancellation requested",
                LeaseInterrupted: "lease lost: another worker may run this job now",
                ShuttingDown: "worker shutting down",
            }
            raise why(f"job {self.id} attempt {self.attempt}: {messages.get(why, 'stopped')}")

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early when the handler must stop. True if stopped."""
        with _EVENTS:
            if self._stopped:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(seconds)

    # -- fenced writes -------------------------------------------------------------------
    def save_checkpoint(self, value: Any) -> None:
        """Persist ``value`` for the next attempt. Raises LeaseLost if this attempt is stale."""
        text = to_text(self.codec, value, "checkpoint")
        if not self._store.save_checkpoint(self.lease, text):
            self.interrupt(LeaseInterrupted)
            raise LeaseLost(self.id, self.attempt, "checkpoint")
        self.job = _replace_job(self.job, checkpoint=text)

    def set_progress(self, value: Any) -> None:
        text = to_text(self.codec, value, "progress")
        if not self._store.set_progress(self.lease, text):
            self.interrupt(LeaseInterrupted)
            raise LeaseLost(self.id, self.attempt, "progress")
        self.job = _replace_job(self.job, progress=text)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A database transaction that also completes this attempt (PostgreSQL store).

        Your writes on the yielded connection and the fenced completion commit together. If
        the lease was lost, LeaseLost is raised and everything rolls back, so the writes happen
        exactly once across all attempts. The handler's return value is then not stored.
        """
        store = transactional_finish(self._store)
        if store is None:
            raise ConfigError(self._store.capabilities.why_not
                              or f"the {self._store.kind} store has no transactional completion")
        with store.transaction() as conn:
            yield conn
            rejected = store.finish([Outcome(self.lease, "done")], conn=conn)
            if rejected:
                raise LeaseLost(self.id, self.attempt, "transactional completion")
        self.completed_in_transaction = True


def _replace_job(job: JobRecord, **changes: Any) -> JobRecord:
    return replace(job, **changes)


def current_job() -> JobContext:
    """The attempt the calling handler is running. Raises outside a handler."""
    try:
        return _current.get()
    except LookupError:
        raise TetherError("current_job() called outside a running tether job") from None


#: Make ``ctx`` the running attempt of this thread (or task); returns the token to unbind.
#: The context variable's own methods, not wrappers: called twice per job.
bind: Callable[[JobContext], contextvars.Token[JobContext]] = _current.set
unbind: Callable[[contextvars.Token[JobContext]], None] = _current.reset


def follow_logs() -> None:
    """Make this process's log records carry the running attempt's job (issue #24,
    :mod:`tether._logcontext`): a worker and a process-pool child call it once as they start,
    so ``bind`` stays the bare ``ContextVar.set`` on the per-job path."""
    _logcontext.install(_current)
