"""Which token role may call which store method: the one table the server and docs use.

Invariant: ``WORKER`` is a subset of ``ADMIN`` and ``ADMIN`` is exactly every method the
server serves (``METHODS``): a method missing here cannot be called at all, so a new contract
method is refused until someone decides who may call it. A worker token covers what workers
and producers need (the lease path, producing, reading jobs, waiting for results, and the
maintenance a worker's maintainer runs); it can never cancel, retry, purge, pause or list
every job. ``migrate`` is the one special case: a worker token may call it, but the server
refuses it unless nothing needs doing (see :mod:`tether._server.service`).
"""

from __future__ import annotations

__all__ = ["ADMIN", "METHODS", "WORKER", "rpc_name"]

#: Methods a worker token may call (snake_case contract names, plus ``hello``).
WORKER: frozenset[str] = frozenset({
    "hello", "now", "info", "check_schema", "migrate", "get_job", "get_jobs", "job_links",
    "enqueue", "wait_for_finish",
    "claim", "heartbeat", "finish", "save_checkpoint", "set_progress", "wait_for_jobs",
    "wait_for_signal", "notify", "paused_queues", "register_worker", "unregister_worker",
    "reap_expired", "next_lease_expiry", "housekeeping", "prune", "delete_dead_workers",
    "leader_acquire", "leader_renew", "leader_release", "leader_get", "leader",
    "schedule_tick", "schedules",
})

#: Methods only an admin token may call.
_ADMIN_ONLY: frozenset[str] = frozenset({
    "cancel", "retry_failed", "purge", "pause_queue", "resume_queue", "list_jobs",
    "search_jobs", "counts", "list_workers",
})

#: Every method (an admin token may call each).
ADMIN: frozenset[str] = WORKER | _ADMIN_ONLY

#: Every method the server serves, as its RPC name (CamelCase) -> contract name.
METHODS: dict[str, str] = {
    "".join(part.capitalize() for part in name.split("_")): name for name in sorted(ADMIN)
}


def rpc_name(method: str) -> str:
    """The RPC name of a contract method: ``wait_for_jobs`` -> ``WaitForJobs``."""
    return "".join(part.capitalize() for part in method.split("_"))
