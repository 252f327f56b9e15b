"""Reading a store record into the user's view, :class:`tether.Job`.

Arguments, result, checkpoint and progress are decoded by the app's codec (arguments and
result by the task's annotations when the app knows the task); every time becomes a
timezone-aware UTC datetime. A value that no longer decodes is shown as its plain JSON rather
than failing the read: a job view is for looking, and must work on any row the store holds.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tether._codec import Codec
from tether._jobview import Job
from tether.stores._records import JobRecord

if TYPE_CHECKING:
    from tether._task import Task

__all__ = ["utc", "view"]


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
        uid=record.uid,
        limit_key=record.limit_key,
        snoozes=record.snoozes,
    )
