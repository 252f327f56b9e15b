"""``tether.Job``: the public view of one job, in Python values.

The store record (:class:`tether.stores.JobRecord`) carries JSON text and epoch floats, and
never leaves the store seam except through the operations layer (CLI, dashboard, metrics use
the store contract directly). What ``App.get_job`` hands users is this view: arguments, result,
checkpoint, progress and error history decoded by the app's codec (arguments and result by the
task's annotations when the app knows the task), and every time a timezone-aware UTC datetime.
It is a snapshot: reading it never touches the store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tether._codec import Codec
from tether.stores._records import JobRecord, JobStatus

if TYPE_CHECKING:
    from tether._task import Task

__all__ = ["Job", "view"]


@dataclass(frozen=True, slots=True)
class Job:
    """One job as of the moment it was read.

    ``attempt`` counts claims (``(id, attempt)`` is the dedup key of an attempt); ``failures``
    counts handler errors and timeouts, ``stall_count`` lost leases, ``interruptions`` leases
    handed back on shutdown. ``errors`` holds one ``{"attempt", "error", "reason", "at",
    "owner"}`` record per attempt that did not succeed, oldest first (``at`` a datetime).
    """

    id: int
    task: str
    queue: str
    status: JobStatus
    priority: int
    args: list[Any]
    kwargs: dict[str, Any]
    result: Any
    checkpoint: Any
    progress: Any
    attempt: int
    max_attempts: int
    failures: int
    stall_count: int
    max_stalls: int
    interruptions: int
    failure_reason: str | None
    last_error: str | None
    unique_key: str | None
    cancel_requested: bool
    locked_by: str | None
    run_at: datetime
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    lease_until: datetime | None
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        """Done, failed (dead-lettered) or cancelled: nothing will change it any more
        (short of a dead-letter retry)."""
        return self.status in ("done", "failed", "cancelled")

    # Names of the store record's decoded helpers, for code written before the view.
    @property
    def result_value(self) -> Any:
        """The same as :attr:`result`."""
        return self.result

    @property
    def error_history(self) -> list[dict[str, Any]]:
        """The same as :attr:`errors`."""
        return self.errors


def utc(epoch: float | None) -> datetime | None:
    """An epoch-seconds float as an aware UTC datetime (None stays None)."""
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


def _plain(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:  # never stored by tether; shown as it is rather than failing the read
        return text


def _decoded(codec: Codec, text: str | None, type_: Any) -> Any:
    value = _plain(text)
    if value is None:
        return None
    try:
        return codec.decode(value, type_)
    except Exception:  # e.g. a result stored before its annotation changed: show plain JSON
        return value


def _call(record: JobRecord, codec: Codec, task: Task[Any, Any] | None) \
        -> tuple[list[Any], dict[str, Any]]:
    value = _plain(record.payload)
    if not (isinstance(value, list) and len(value) in (2, 3)
            and isinstance(value[0], list) and isinstance(value[1], dict)):
        return [], {}
    if task is not None:
        try:
            return task.arguments(record.payload)
        except Exception:  # arguments that no longer fit: the worker dead-letters them
            pass
    return [codec.decode(v, Any) for v in value[0]], \
        {k: codec.decode(v, Any) for k, v in value[1].items()}


def _errors(text: str) -> list[dict[str, Any]]:
    records = _plain(text)
    if not isinstance(records, list):
        return []
    out = []
    for record in records:
        if isinstance(record, dict):
            at = record.get("at")
            if isinstance(at, int | float) and not isinstance(at, bool):
                out.append({**record, "at": utc(float(at))})
            else:
                out.append(record)
    return out


def view(record: JobRecord, codec: Codec, task: Task[Any, Any] | None = None) -> Job:
    """The public view of a store record; ``task`` (when the app knows it) types the
    arguments and the result."""
    args, kwargs = _call(record, codec, task)
    result_type = task.hints.get("return", Any) if task is not None else Any
    created = utc(record.created_at)
    run_at = utc(record.run_at)
    assert created is not None and run_at is not None
    return Job(
        id=record.id, task=record.task, queue=record.queue, status=record.status,
        priority=record.priority, args=args, kwargs=kwargs,
        result=_decoded(codec, record.result, result_type),
        checkpoint=_decoded(codec, record.checkpoint, Any),
        progress=_decoded(codec, record.progress, Any),
        attempt=record.attempt, max_attempts=record.max_attempts, failures=record.failures,
        stall_count=record.stall_count, max_stalls=record.max_stalls,
        interruptions=record.interruptions, failure_reason=record.failure_reason,
        last_error=record.last_error, unique_key=record.unique_key,
        cancel_requested=record.cancel_requested, locked_by=record.locked_by,
        run_at=run_at, created_at=created, started_at=utc(record.started_at),
        finished_at=utc(record.finished_at), lease_until=utc(record.lease_until),
        errors=_errors(record.errors),
    )
