"""Which role may call which store method through ``tether server``: the one table the
server's authorizer and the docs read.

Invariant: ``WORKER`` is a subset of ``ADMIN``, and ``ADMIN`` is every method the server
serves. A worker token is what every worker and producer holds, so it gets what they need
(enqueue, claim and the fenced writes, reading jobs, waiting for results, and the
maintenance a worker's maintainer runs) and nothing that touches other people's jobs in bulk
or changes the schema (cancel, retry, purge, pause/resume, listings, migrate).
"""

from __future__ import annotations

#: Contract methods (snake_case) a worker token may call.
WORKER: frozenset[str] = frozenset({
    "hello", "now", "info", "check_schema", "get_job", "get_jobs", "job_links",
    "enqueue", "wait_for_finish",
    "claim", "heartbeat", "finish", "save_checkpoint", "set_progress", "wait_for_jobs",
    "notify", "paused_queues", "register_worker", "unregister_worker",
    # What a worker's maintainer runs (the elections, the reaper, the pruner, schedules).
    "reap_expired", "next_lease_expiry", "housekeeping", "prune", "delete_dead_workers",
    "leader_acquire", "leader_renew", "leader_release", "leader_get", "leader",
    "schedule_tick", "schedules",
})

#: Every method: an admin token may also cancel, retry, purge, pause and resume queues, list
#: and count every job and worker, and migrate the schema.
ADMIN: frozenset[str] = WORKER | frozenset({
    "cancel", "retry_failed", "purge", "pause_queue", "resume_queue", "list_jobs",
    "search_jobs", "counts", "list_workers", "migrate",
})

__all__ = ["ADMIN", "WORKER"]
