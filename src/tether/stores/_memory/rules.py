"""The counting rules of :mod:`tether.stores._contract` as pure functions of a row, for the memory
store: what an outcome does to a held job, the error record, and how a replayed outcome is
recognised. Nothing here touches shared state, so each rule reads as the SQL stores state it
(``queries.sql``'s ``finish``, ``finish_replayed`` and ``reap``).
"""

from __future__ import annotations

import json
from dataclasses import replace

from tether._text import clean_optional
from tether.stores._contract import JobRecord, JobStatus, Outcome

#: The error record's reason when the outcome gives none.
DEFAULT_REASON = {
    "error": "error", "dead": "error", "released": "released", "stalled": "stalled",
    "cancelled": "cancelled", "done": "done", "snoozed": "snoozed",
}


def error_record(job: JobRecord, error: str, reason: str, at: float) -> str:
    """``job.errors`` with one record appended: exactly attempt, error, reason, at and owner
    (the lease's owner, read before the lease is cleared)."""
    try:
        records = json.loads(job.errors)
    except ValueError:
        records = []
    if not isinstance(records, list):
        records = []
    records.append({"attempt": job.attempt, "error": error, "reason": reason, "at": at,
                    "owner": job.locked_by})
    return json.dumps(records, ensure_ascii=False)


def next_status(job: JobRecord, kind: str) -> JobStatus:
    """Where an attempt ending by ``kind`` sends the job (a requested cancel sticks unless
    the work was done or the job is dead-lettered)."""
    if kind == "done":
        return "done"
    if kind == "cancelled":
        return "cancelled"
    if kind == "dead":
        return "failed"
    if job.cancel_requested:
        return "cancelled"
    if kind in ("released", "snoozed"):
        return "pending"
    if kind == "stalled":
        stalls = job.stall_count + 1
        ok = stalls < job.max_stalls and job.failures + stalls < job.max_attempts
        return "pending" if ok else "failed"
    return "pending" if job.failures + 1 + job.stall_count < job.max_attempts else "failed"


def apply_outcome(job: JobRecord, o: Outcome, now: float) -> JobRecord:
    """The row after outcome ``o`` of the attempt holding ``job`` (already fenced)."""
    status = next_status(job, o.kind)
    error = clean_optional(o.error)
    reason = o.reason or DEFAULT_REASON[o.kind]
    run_at = job.run_at
    if status == "pending" and (o.kind in ("error", "snoozed") or (o.kind == "released"
                                                                   and o.retry_delay > 0)):
        run_at = now + float(o.retry_delay)
    snoozed = o.kind == "snoozed"
    if snoozed and error is None:
        error = "snoozed"  # a snooze is always on record, but is never the last error
    return replace(
        job,
        status=status,
        failures=job.failures + (o.kind in ("error", "dead")),
        interruptions=job.interruptions + (o.kind == "released"),
        stall_count=job.stall_count + (o.kind == "stalled"),
        snoozes=job.snoozes + snoozed,
        run_at=run_at,
        result=o.result if o.kind == "done" else job.result,
        last_error=error if error is not None and not snoozed else job.last_error,
        errors=job.errors if error is None else error_record(job, error, reason, now),
        failure_reason=reason if status == "failed" else job.failure_reason,
        finished_at=now if status in ("done", "failed", "cancelled") else job.finished_at,
        locked_by=None,
        lease_until=None,
    )  # lease_token is kept: a replayed finish recognises its own applied outcome by it


def replayed(job: JobRecord | None, o: Outcome) -> bool:
    """True when ``o`` is an outcome this very lease already applied (a finish whose reply
    was lost, sent again): the row left running at that attempt and still carries the lease's
    token, which only the holder's own finish leaves behind, in a status ``o`` leads to."""
    if job is None or not o.lease.token or job.attempt != o.lease.attempt \
            or job.lease_token != o.lease.token:
        return False
    allowed = {
        "done": ("done",), "dead": ("failed",), "cancelled": ("cancelled",),
        "released": ("pending", "cancelled"),
    }.get(o.kind, ("pending", "failed", "cancelled"))
    return job.status in allowed
