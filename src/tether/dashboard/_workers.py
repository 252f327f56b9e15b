"""Workers with the jobs they hold now: the running jobs grouped by ``locked_by``.

One ``list_workers`` and one ``search_jobs(status=running)`` per view, whatever the number of
workers: the contract has no per-worker query, and the running set is bounded by the fleet's
concurrency. A running job whose holder has no worker row (it died and was removed, or it
runs behind the remote-worker server under another name) is listed under its holder anyway.
"""

from __future__ import annotations

import json
from typing import Any

from tether._cli.common import live_workers
from tether._config import Settings
from tether.stores._contract import Admin, JobFilter, JobRecord

#: Running jobs one view reads at most.
MOST_RUNNING = 5_000


def progress(job: JobRecord) -> Any:
    if job.progress is None:
        return None
    try:
        return json.loads(job.progress)
    except ValueError:
        return job.progress


def running_job(job: JobRecord, now: float) -> dict[str, Any]:
    return {"id": job.id, "task": job.task, "queue": job.queue, "attempt": job.attempt,
            "started_at": job.started_at, "lease_until": job.lease_until,
            "running_for": None if job.started_at is None else max(0.0, now - job.started_at),
            "cancel_requested": job.cancel_requested, "progress": progress(job)}


def workers_view(store: Admin, settings: Settings) -> list[dict[str, Any]]:
    """Every registered worker (and every other holder of a running job), with its jobs."""
    now = store.now()
    listed = store.list_workers()
    live = live_workers(store, listed, now, settings.lease_ttl)
    held: dict[str, list[dict[str, Any]]] = {}
    for job in store.search_jobs(JobFilter(status="running", newest_first=False),
                                 limit=MOST_RUNNING):
        held.setdefault(job.locked_by or "?", []).append(running_job(job, now))
    rows = [{"id": w.id, "host": w.host, "pid": w.pid, "queues": list(w.queues),
             "concurrency": w.concurrency, "started_at": w.started_at,
             "last_seen": w.last_seen, "seen_ago": max(0.0, now - w.last_seen),
             "live": live[w.id], "registered": True, "jobs": held.pop(w.id, [])}
            for w in listed]
    rows += [{"id": owner, "host": None, "pid": None, "queues": [], "concurrency": None,
              "started_at": None, "last_seen": None, "seen_ago": None, "live": None,
              "registered": False, "jobs": jobs} for owner, jobs in sorted(held.items())]
    return rows
