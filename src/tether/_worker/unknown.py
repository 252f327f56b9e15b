"""Jobs of a task this worker does not know: hand them back, dead-letter them only late.

During a rolling deploy an old worker claims jobs of a task only the new release has. Such a
job is *handed back* (``released`` with reason ``unknown_task``: neither a failure nor a stall,
due again a few seconds later so it does not spin between old workers), for a worker that knows
the task to run. It is dead-lettered (``dead``, reason ``unknown_task``) only once no worker
has known the task for ``unknown_task_timeout``, counted from the first hand-back of the
current run of them in the job's error history, by the store's clock (the claim's
``started_at``), so clock skew between workers does not matter.
"""

from __future__ import annotations

import logging
from typing import Any

from tether.stores._contract import JobRecord, Lease, Outcome

log = logging.getLogger("tether.worker")

#: The first hand-back delays the job this long; each further one doubles it, up to the max.
FIRST_DELAY = 5.0
MAX_DELAY = 60.0
#: Starts the error text of the dead-letter, which ends an episode of hand-backs: a job
#: retried from the dead-letter queue gets a full ``unknown_task_timeout`` again.
DEAD_PREFIX = "no worker has known task"


def unknown_since(job: JobRecord) -> tuple[float | None, int]:
    """(store time of the first hand-back of the latest run of them, how many there were)."""
    try:
        records: list[Any] = job.error_history
    except (TypeError, ValueError):
        records = []
    first: float | None = None
    count = 0
    for record in reversed(records):
        if not isinstance(record, dict) or record.get("reason") != "unknown_task":
            break
        if str(record.get("error", "")).startswith(DEAD_PREFIX):
            break
        at = record.get("at")
        if isinstance(at, int | float) and not isinstance(at, bool):
            first = float(at)
            count += 1
    return first, count


def unknown_task_outcome(job: JobRecord, lease: Lease, worker: str, timeout: float, *,
                         warn: bool) -> Outcome:
    """The outcome for a claimed job whose task this worker has not registered."""
    first, handed_back = unknown_since(job)
    now = job.started_at if job.started_at is not None else (first or 0.0)
    waited = 0.0 if first is None else max(0.0, now - first)
    if waited >= timeout:
        log.error("job %s: no worker has known task %r for %.0fs (unknown_task_timeout=%gs); "
                  "dead-lettering it", job.id, job.task, waited, timeout)
        return Outcome(lease, "dead", reason="unknown_task",
                       error=f"{DEAD_PREFIX} {job.task!r} for {waited:.0f}s "
                             f"(unknown_task_timeout={timeout:g}s)")
    if warn:
        log.warning("job %s: this worker does not know task %r; handing its jobs back for a "
                    "worker that does (dead-lettered if none has for unknown_task_timeout="
                    "%gs)", job.id, job.task, timeout)
    delay = min(MAX_DELAY, FIRST_DELAY * 2.0 ** handed_back, timeout - waited + 0.01)
    return Outcome(lease, "released", reason="unknown_task", retry_delay=max(0.0, delay),
                   error=f"no task named {job.task!r} in worker {worker}")
