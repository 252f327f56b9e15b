"""Logging: one line per thing an operator must see about a job, in text or JSON.

Why it is driven by :mod:`tether.events`: the worker's threads (fetcher, completer,
heartbeater, reaper) already announce every claim and every outcome there, with the job's
id, attempt and owner. Turning those into log lines in one subscriber keeps the hot paths
free of formatting, gives every line the same structured fields (``job_id``, ``attempt``,
``task``, ``queue``, ``worker``, ``duration``) and lets metrics and tracing subscribe the same
way. Every :class:`~tether._events.Events` carries a :class:`JobLog`, so a worker started from
Python logs exactly like ``tether worker``.

Loggers are standard ``logging`` loggers under ``tether.*`` (``tether.jobs`` for the per-job
lines), so ``logging.config.dictConfig`` can route and filter them; :class:`JsonFormatter` is
importable by dictConfig (``"()": "tether._logs.JsonFormatter"``).

Levels: a job's start and finish are DEBUG (there is one per job; a busy worker would drown
everything else), a scheduled retry is INFO, a failed attempt and a lost lease are WARNING
(with the traceback), a dead-letter is ERROR.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Protocol, TextIO

from tether import _clock as clock
from tether._config import Settings
from tether._errors import ConfigError

log = logging.getLogger("tether.jobs")

FORMATS = ("text", "json")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: Structured fields copied from a record into JSON output (when present).
FIELDS = ("job_id", "attempt", "task", "queue", "worker", "duration", "delay", "reason",
          "outcome", "error", "traceback", "event", "version", "store", "tasks", "queues",
          "pool", "concurrency", "child", "status", "listen", "tls", "tokens", "maintenance")
#: What a record created inside a handler carries (tether._logcontext), in text-line order.
JOB_FIELDS = ("job_id", "task", "attempt", "queue")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: Claims tracked for durations; an attempt whose end is never announced (completed inside a
#: caller's transaction, the process killed) must not grow the map forever.
MAX_TRACKED = 65_536


class LoggedEvent(Protocol):
    """The part of a :class:`tether._events.Event` a job line reads. Named by its shape:
    every ``Events`` subscribes a :class:`JobLog`, so the events module imports this one."""

    @property
    def name(self) -> str: ...

    @property
    def job_id(self) -> int | None: ...

    @property
    def attempt(self) -> int | None: ...

    @property
    def worker(self) -> str | None: ...

    @property
    def detail(self) -> dict[str, Any]: ...


class EventBus(Protocol):
    """What :class:`JobLog` subscribes to (:class:`tether._events.Events`)."""

    def on(self, name: str, callback: Callable[[LoggedEvent], object]) -> object: ...


def check_level(value: str) -> str:
    """A level name, upper-cased; ConfigError naming the choices otherwise."""
    level = str(value).upper()
    if level not in LEVELS:
        raise ConfigError(f"log level {value!r} is not one of {', '.join(LEVELS)}")
    return level


def check_format(value: str) -> str:
    fmt = str(value).lower()
    if fmt not in FORMATS:
        raise ConfigError(f"log format {value!r} is not one of {', '.join(FORMATS)}")
    return fmt


def iso(ts: float) -> str:
    """ISO 8601 in UTC with the zone spelled out (``2024-05-01T12:00:00.123+00:00``)."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")


def split_error(error: str | None) -> tuple[str | None, str | None]:
    """(the first line of a stored error, the traceback after it or None)."""
    if not error:
        return None, None
    head, _, rest = error.partition("\n")
    return head, (rest.strip() or None)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601, UTC), level, logger, message, the job fields
    present on the record, and ``exception`` when the record carries exc_info."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": iso(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in FIELDS:
            value = record.__dict__.get(key)
            if value is not None:
                data[key] = value
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            data["stack"] = self.formatStack(record.stack_info)
        return json.dumps(data, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """The classic line, with a job line's traceback indented below it (set apart), and
    ``[job_id=… task=… attempt=… queue=…]`` after a line written inside a handler."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = record.__dict__
        # A line written inside a handler names its job (tether._logcontext); tether's own job
        # lines already say which job in their message.
        if fields.get("job_id") is not None and record.name != log.name:
            text += " [" + " ".join(f"{k}={fields.get(k)}" for k in JOB_FIELDS
                                    if fields.get(k) is not None) + "]"
        tb = fields.get("traceback")
        if tb:
            text += "\n" + "\n".join("    " + line for line in str(tb).splitlines())
        return text


def configure(level: str = "INFO", fmt: str | None = None, stream: TextIO | None = None) -> None:
    """Send ``tether.*`` (and everything else) to ``stream`` at ``level`` in ``fmt``.

    ``fmt`` defaults to ``$TETHER_LOG_FORMAT``, else text. This replaces the root handlers
    (like ``logging.basicConfig(force=True)``); applications with their own logging set-up
    should use dictConfig instead and not call it.
    """
    chosen = check_format(fmt or os.environ.get("TETHER_LOG_FORMAT") or "text")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if chosen == "json" else TextFormatter())
    logging.basicConfig(level=check_level(level), handlers=[handler], force=True)


def worker_banner(settings: Settings, url: str, task_names: Iterable[str], worker_id: str,
                  queues: list[str], concurrency: int,
                  pool: str = "threads") -> tuple[str, dict[str, Any]]:
    """The start-up line: what this worker is, where its jobs live (``url``), what it will
    run (``task_names``: the runtime's registered tasks).

    One line (grep-able, one JSON object in json format); the store URL's password is
    redacted. Returns (message, structured fields).
    """
    from tether._version import __version__
    from tether.stores._urls import redact

    tasks = sorted(task_names)
    s = settings
    fields: dict[str, Any] = {
        "version": __version__, "worker": worker_id, "store": redact(url),
        "tasks": tasks, "queues": queues, "pool": pool, "concurrency": concurrency,
        "lease_ttl": s.lease_ttl, "shutdown_timeout": s.shutdown_timeout,
    }
    shown = ", ".join(tasks[:20]) + (f", … ({len(tasks)} in all)" if len(tasks) > 20 else "")
    message = (f"tether {__version__} worker {worker_id}: store {fields['store']}; "
               f"queues {', '.join(queues)}; {len(tasks)} task(s): {shown or '(none)'}; "
               f"pool {pool}, concurrency {concurrency}; lease_ttl {s.lease_ttl:g}s, "
               f"shutdown_timeout {s.shutdown_timeout:g}s")
    return message, fields


class JobLog:
    """Subscribes to one :class:`~tether._events.Events` and logs each job's story (see the
    module doc)."""

    def __init__(self, events: EventBus) -> None:
        # (job id, attempt) -> (claimed at, task, queue). A plain dict (insertion order is
        # claim order): setting and popping one key is atomic under the GIL, so the per-job
        # calls take no lock; only the eviction of the oldest claims does.
        self._claims: dict[tuple[int | None, int | None], tuple[float, Any, Any]] = {}
        self._lock = threading.Lock()
        for name, callback in (
            ("claimed", self.claimed), ("completed", self.completed),
            ("retrying", self.retrying), ("failed", self.failed),
            ("cancelled", self.cancelled), ("released", self.released),
            ("snoozed", self.snoozed),
            ("lease_lost", self.lease_lost), ("stalled", self.stalled),
            ("child_exited", self.child_exited),
        ):
            events.on(name, callback)

    # -- bookkeeping ---------------------------------------------------------------------------
    def _fields(self, event: LoggedEvent, *, end: bool) -> dict[str, Any]:
        """The structured fields of a job line; ``end`` drops the claim and adds a duration."""
        key = (event.job_id, event.attempt)
        found = self._claims.pop(key, None) if end else self._claims.get(key)
        detail = event.detail
        fields: dict[str, Any] = {
            "job_id": event.job_id, "attempt": event.attempt, "worker": event.worker,
            "task": detail.get("task"), "queue": detail.get("queue"), "event": event.name,
        }
        if detail.get("child") is not None:  # the process-pool child that ran the attempt
            fields["child"] = detail["child"]
        if found is not None:
            started, task, queue = found
            if fields["task"] is None:
                fields["task"] = task
            if fields["queue"] is None:
                fields["queue"] = queue
            if end:
                fields["duration"] = round(clock.monotonic() - started, 6)
        return fields

    @staticmethod
    def _where(f: dict[str, Any]) -> str:
        parts = [f"task {f['task']}" if f.get("task") else "",
                 f"queue {f['queue']}" if f.get("queue") else ""]
        took = f" after {f['duration']:.3f}s" if f.get("duration") is not None else ""
        inner = ", ".join(p for p in parts if p)
        return (f" ({inner})" if inner else "") + took

    # -- callbacks -----------------------------------------------------------------------------
    @staticmethod
    def logs_starts() -> bool:
        """A job's start makes a line (DEBUG): :meth:`claimed` must see the event."""
        return log.isEnabledFor(logging.DEBUG)

    def note_claim(self, job_id: int | None, attempt: int | None, task: Any, queue: Any,
                   at: float) -> None:
        """Remember a claim (for the duration on its end line) that started at ``at``
        (monotonic): :meth:`claimed` without the line, called directly by the event bus
        while no one else listens to claims."""
        claims = self._claims
        claims[(job_id, attempt)] = (at, task, queue)
        if len(claims) > MAX_TRACKED:
            with self._lock:
                while len(claims) > MAX_TRACKED:
                    claims.pop(next(iter(claims)), None)

    def forget(self, job_id: int | None, attempt: int | None) -> None:
        """Drop a claim whose end makes no line (see :meth:`completed`)."""
        self._claims.pop((job_id, attempt), None)

    def claimed(self, event: LoggedEvent) -> None:
        detail = event.detail
        self.note_claim(event.job_id, event.attempt, detail.get("task"), detail.get("queue"),
                        clock.monotonic())
        if log.isEnabledFor(logging.DEBUG):
            f = self._fields(event, end=False)
            log.debug("job %s attempt %s started%s", event.job_id, event.attempt,
                      self._where(f), extra=f)

    def completed(self, event: LoggedEvent) -> None:
        if not log.isEnabledFor(logging.DEBUG):  # the per-job hot path: no line to build
            self.forget(event.job_id, event.attempt)
            return
        f = self._fields(event, end=True)
        f["outcome"] = "done"
        log.debug("job %s attempt %s done%s", event.job_id, event.attempt, self._where(f),
                  extra=f)

    def _attempt_failed(self, event: LoggedEvent, f: dict[str, Any]) -> None:
        error, tb = split_error(event.detail.get("error"))
        f.update(error=error, traceback=tb, reason=event.detail.get("reason") or "error")
        log.warning("job %s attempt %s failed%s: %s", event.job_id, event.attempt,
                    self._where(f), error or "(no error text)", extra=f)

    def retrying(self, event: LoggedEvent) -> None:
        f = self._fields(event, end=True)
        f["outcome"] = "retrying"
        self._attempt_failed(event, dict(f))
        delay = event.detail.get("delay")
        f["delay"] = delay
        log.info("job %s: retry scheduled in %ss%s", event.job_id,
                 "?" if delay is None else f"{float(delay):.3f}".rstrip("0").rstrip("."),
                 self._where({**f, "duration": None}), extra=f)

    def failed(self, event: LoggedEvent) -> None:
        f = self._fields(event, end=True)
        f["outcome"] = "failed"
        reason = event.detail.get("reason") or "error"
        if event.detail.get("kind", "error") == "error":  # an ordinary failure, budget spent
            self._attempt_failed(event, dict(f))
        error = split_error(event.detail.get("error"))[0]
        f.update(reason=reason, error=error)
        log.error("job %s dead-lettered after attempt %s (reason %s)%s: %s", event.job_id,
                  event.attempt, reason, self._where({**f, "duration": None}),
                  error or "(no error text)", extra=f)

    def cancelled(self, event: LoggedEvent) -> None:
        f = self._fields(event, end=True)
        f["outcome"] = "cancelled"
        log.info("job %s attempt %s cancelled%s", event.job_id, event.attempt,
                 self._where(f), extra=f)

    def released(self, event: LoggedEvent) -> None:
        f = self._fields(event, end=True)
        f["outcome"] = "released"
        why = event.detail.get("why") or "worker stopping"
        (log.debug if "not started" in why else log.info)(
            "job %s attempt %s handed back (%s)%s", event.job_id, event.attempt, why,
            self._where(f), extra=f)

    def snoozed(self, event: LoggedEvent) -> None:
        f = self._fields(event, end=True)
        f["outcome"] = "snoozed"
        f["delay"] = event.detail.get("delay")
        log.info("job %s attempt %s %s%s", event.job_id, event.attempt,
                 event.detail.get("error") or "snoozed", self._where(f), extra=f)

    def lease_lost(self, event: LoggedEvent) -> None:
        f = self._fields(event, end=True)
        f["outcome"] = "lease_lost"
        why = event.detail.get("why") or (
            f"its {event.detail['rejected']} was rejected" if "rejected" in event.detail
            else "the store no longer holds it for this worker")
        f["reason"] = why
        log.warning("job %s attempt %s: lease lost (%s)%s; the job is someone else's now",
                    event.job_id, event.attempt, why, self._where(f), extra=f)

    def stalled(self, event: LoggedEvent) -> None:
        """The reaper took a lease back (its holder stopped renewing it), or, with ``kind``
        ``stalled``, this worker reported that the process running the handler died (a
        process-pool child) and the job is due again (a dead-letter is a ``failed`` event)."""
        f = self._fields(event, end=True)
        if event.detail.get("kind") == "stalled":
            error = split_error(event.detail.get("error"))[0]
            f.update(outcome="stalled", reason="stalled", error=error)
            log.warning("job %s attempt %s stalled: the process running its handler died%s: "
                        "%s; the job is due again", event.job_id, event.attempt,
                        self._where(f), error or "(no error text)", extra=f)
            return
        dead = event.detail.get("status") == "failed"
        f.update(outcome="failed" if dead else "stalled", reason="stalled")
        if dead:
            log.error("job %s dead-lettered after attempt %s (reason stalled): worker %s stopped "
                      "renewing its lease", event.job_id, event.attempt, event.worker, extra=f)
        else:
            log.warning("job %s attempt %s stalled: worker %s stopped renewing its lease; "
                        "the job is due again", event.job_id, event.attempt, event.worker,
                        extra=f)

    def child_exited(self, event: LoggedEvent) -> None:
        """A process-pool child ended (recycled, stopped, crashed). The pool itself logs the
        crashes and stops an operator must see (and the attempt's own event follows), so this
        line is DEBUG: it keeps the pid, exit status and job count in structured logs."""
        if not log.isEnabledFor(logging.DEBUG):
            return
        d = event.detail
        f: dict[str, Any] = {"job_id": event.job_id, "attempt": event.attempt,
                             "worker": event.worker, "event": event.name,
                             "child": d.get("child"), "status": d.get("status"),
                             "reason": d.get("why")}
        running = (f" running job {event.job_id} attempt {event.attempt}"
                   if event.job_id is not None else "")
        log.debug("child %s %s (%s)%s after %s job(s)", d.get("child"), d.get("status"),
                  d.get("why"), running, d.get("jobs"), extra=f)
