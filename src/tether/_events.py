"""Plain-callback events. A failing callback is logged and never reaches the worker.

What each event's ``detail`` carries (logs, metrics and tracing subscribe to these, so the
worker's threads never format or count anything themselves):

* ``claimed``: ``task``, ``queue``, ``waited`` (seconds from the job being due, its
  ``run_at``, to the claim, by the store's clock: the time it spent waiting in its queue).
* ``enqueued`` (a producer: one per enqueue call that the store accepted): ``counts``, a dict
  of ``(task, queue)`` to the number of jobs enqueued; only built while someone listens.
* ``completed``, ``retrying``, ``failed``, ``cancelled``, ``released`` (an outcome written by
  the completer): ``task``, ``queue``, ``kind`` (the outcome), ``reason``, ``delay`` (the
  retry delay, seconds) and ``error`` (first line, then the traceback) when there is one.
* ``lease_lost``: ``task``, ``queue`` and ``why`` (heartbeat) or ``rejected`` (the outcome
  kind the store refused).
* ``stalled`` (the reaper): ``status`` (pending or failed), ``stall_count``. From the
  completer (a process-pool child died running the attempt, and the job is due again): the
  outcome fields above with ``kind`` ``stalled``; a stall that dead-letters is ``failed``.
* Outcome events of a process-pool worker also carry ``child`` (the pid that ran the attempt).
* ``child_exited`` (process pool): ``child`` (pid), ``status`` (exit code or signal), ``why``,
  ``jobs`` (attempts it ran); with the job id and attempt when it died running one.
* ``heartbeat``: ``rtt`` (seconds, the round trip of one batched renewal), ``leases``.
* ``leadership_acquired`` / ``leadership_lost``: ``name``, ``term`` (and ``why`` when lost).
* ``schedule_enqueued`` (job id set) / ``schedule_skipped`` (the maintenance leader, issue #12):
  ``schedule``, ``task``, ``tick`` (epoch seconds), ``why`` (skipped: ``catch_up=none``,
  ``catch_up=latest``, ``catch_up=all`` bound, ``start``) and ``missed`` (ticks passed over).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tether._errors import ConfigError
from tether._logs import JobLog

log = logging.getLogger("tether.events")

EVENTS = frozenset({
    "enqueued", "claimed", "completed", "retrying", "failed", "stalled", "lease_lost", "cancelled",
    "released", "snoozed", "leadership_acquired", "leadership_lost", "heartbeat", "child_exited",
    "schedule_enqueued", "schedule_skipped",
})


@dataclass(frozen=True, slots=True)
class Event:
    name: str
    job_id: int | None = None
    attempt: int | None = None
    worker: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


Callback = Callable[[Event], object]

_new = object.__new__
#: The slot setters of Event, in field order: :meth:`Events.emit_job` builds one without the
#: frozen dataclass ``__init__`` (a keyword call and ``object.__setattr__`` per field), as
#: every job emits two events on the worker's hot path. Same object as ``Event(...)``.
_SET_NAME, _SET_JOB_ID, _SET_ATTEMPT, _SET_WORKER, _SET_DETAIL = (
    getattr(Event, name).__set__ for name in ("name", "job_id", "attempt", "worker", "detail"))


class Events:
    def __init__(self) -> None:
        # Copied on subscribe, never mutated: emit (once per job per event) iterates without
        # a copy or a lock.
        self._subscribers: dict[str, tuple[Callback, ...]] = {}
        self._lock = threading.Lock()
        # Every worker logs its jobs, however it was started (see tether._logs).
        self._log = JobLog(self)
        #: The "claimed" listeners while the JobLog is the only one (see emit_claimed).
        self._log_alone = self._subscribers["claimed"]
        #: The "completed" listeners while the JobLog is the only one (see done_quietly).
        self._done_alone = self._subscribers["completed"]

    def on(self, name: str, callback: Callback) -> Callback:
        if name not in EVENTS:
            raise ConfigError(f"unknown event {name!r}; known: {', '.join(sorted(EVENTS))}")
        with self._lock:
            self._subscribers[name] = (*self._subscribers.get(name, ()), callback)
        return callback

    def wants(self, name: str) -> bool:
        """True while ``name`` has a subscriber: an event whose detail is costly to build
        (one per enqueue of thousands of jobs) is built only then."""
        return name in self._subscribers

    def emit(self, name: str, **kwargs: Any) -> None:
        subscribers = self._subscribers.get(name)
        if not subscribers:
            return
        self._deliver(subscribers, Event(name, **kwargs))

    def listeners(self, name: str) -> tuple[Callback, ...]:
        """Who listens to ``name`` now (empty: an emitter may skip building the event)."""
        return self._subscribers.get(name, ())

    def emit_job(self, name: str, job_id: int, attempt: int, worker: str,
                 detail: dict[str, Any]) -> None:
        """:meth:`emit` of a job's event, positional: the per-job path (claims, outcomes)."""
        subscribers = self._subscribers.get(name)
        if not subscribers:
            return
        event: Event = _new(Event)
        _SET_NAME(event, name)
        _SET_JOB_ID(event, job_id)
        _SET_ATTEMPT(event, attempt)
        _SET_WORKER(event, worker)
        _SET_DETAIL(event, detail)
        for callback in subscribers:  # _deliver, inlined: one frame less per job and event
            try:
                callback(event)
            except Exception:
                log.exception("event callback %r for %s failed", callback, name)

    def emit_claimed(self, job_id: int, attempt: int, worker: str, task: str, queue: str,
                     started: float | None, run_at: float, at: float) -> None:
        """The ``claimed`` event of a job whose handler started at ``at`` (monotonic);
        ``started``/``run_at``: the job's claim and due times (the store's clock). While the
        JobLog is its only listener and writes no start line, only the JobLog's note of the
        claim is made (no detail dict, no Event, no clock read): once per job, on the
        handler's path."""
        subscribers = self._subscribers.get("claimed")
        if subscribers is self._log_alone and not self._log.logs_starts():
            self._log.note_claim(job_id, attempt, task, queue, at)
            return
        waited = started - run_at if started is not None and started > run_at else 0.0
        self.emit_job("claimed", job_id, attempt, worker,
                      {"task": task, "queue": queue, "waited": waited})

    def done_quietly(self) -> bool:
        """True while the JobLog alone listens to ``completed`` and writes no line for it
        (a done job's line is DEBUG): the completer then calls :meth:`note_done` instead of
        building an Event and its detail for every job done (a tenth of its time at -c 10).
        Asked once per batch of outcomes, so a listener added meanwhile sees the next one."""
        return (self._subscribers.get("completed") is self._done_alone
                and not self._log.logs_starts())

    def note_done(self, job_id: int, attempt: int) -> None:
        """A done job, while :meth:`done_quietly`: the JobLog forgets its claim."""
        self._log.forget(job_id, attempt)

    @staticmethod
    def _deliver(subscribers: tuple[Callback, ...], event: Event) -> None:
        for callback in subscribers:
            try:
                callback(event)
            except Exception:
                log.exception("event callback %r for %s failed", callback, event.name)
