"""The JSON API's shapes. Field names are stable (docs/dashboard.md lists them): a field may
be added, never renamed or removed without a major release. Times are epoch seconds (floats)
on the store's clock; stored JSON (args, result, progress, checkpoint) is decoded."""

from __future__ import annotations

import json
from typing import Any

from tether.stores._contract import JobRecord


def _decoded(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def job_summary(job: JobRecord) -> dict[str, Any]:
    """A row of a job list."""
    return {"id": job.id, "task": job.task, "queue": job.queue, "status": job.status,
            "priority": job.priority, "attempt": job.attempt,
            "max_attempts": job.max_attempts, "created_at": job.created_at,
            "run_at": job.run_at, "started_at": job.started_at,
            "finished_at": job.finished_at, "locked_by": job.locked_by,
            "failure_reason": job.failure_reason,
            "error": (job.last_error or "").split("\n")[0] or None}


def job_detail(job: JobRecord) -> dict[str, Any]:
    """One job's page."""
    payload = _decoded(job.payload)
    args, kwargs = (payload[0], payload[1]) if isinstance(payload, list) and len(payload) >= 2 \
        else (None, None)
    return {**job_summary(job), "args": args, "kwargs": kwargs, "result": _decoded(job.result),
            "progress": _decoded(job.progress), "checkpoint": _decoded(job.checkpoint),
            "last_error": job.last_error, "errors": _decoded(job.errors),
            "failures": job.failures, "stall_count": job.stall_count,
            "interruptions": job.interruptions, "snoozes": job.snoozes,
            "lease_until": job.lease_until, "unique_key": job.unique_key,
            "limit_key": job.limit_key, "cancel_requested": job.cancel_requested}


def overview(view: dict[str, Any]) -> dict[str, Any]:
    """The overview page's figures (``_data.overview``)."""
    leader = view["leader"]
    return {
        "now": view["now"], "store": view["info"].kind, "totals": view["totals"],
        "done_per_minute": view["done_rate"], "failed_per_minute": view["fail_rate"],
        "queues": [{"name": q["name"], "paused": q["paused"],
                    "oldest_pending_age": q["oldest"],
                    "counts": {s: q[s] for s in view["totals"]}} for q in view["queues"]],
        "workers": [{"id": r["w"].id, "live": r["live"], "held": r["held"],
                     "queues": list(r["w"].queues), "concurrency": r["w"].concurrency,
                     "seen_ago": r["seen_ago"]} for r in view["workers"]],
        "leader": None if leader is None else {"holder": leader.holder, "term": leader.term,
                                               "expires_at": leader.expires_at},
        "expiring": [job_summary(j) for j in view["expiring"]],
        "warnings": list(view["warnings"]), "limits": view["limits"],
    }
