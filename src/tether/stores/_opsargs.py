"""Argument rules of the operations methods (``search_jobs``, ``purge``), shared by every store.

Invariant: the same bad argument gets the same ``ValueError`` from every store, because each
store calls these before touching its data (see :mod:`tether._limits` for the enqueue side).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether import _limits as limits
from tether.stores._contract import TERMINAL, JobFilter


def check_purge(queue: str, statuses: Sequence[str]) -> list[str]:
    """The statuses to purge, deduplicated; running jobs are never purged (cancel them)."""
    limits.check_text(queue, "queue", limit=limits.MAX_NAME)
    chosen = list(dict.fromkeys(statuses))
    bad = [s for s in chosen if s not in ("waiting", "pending", "done", "failed", "cancelled")]
    if bad:
        raise ValueError(f"purge cannot delete {', '.join(map(str, bad))} jobs (only waiting, "
                         "pending, done, failed and cancelled; cancel running jobs instead)")
    return chosen


def check_prune(status: Any) -> None:
    """Prune deletes finished history only: a live or unknown status is bad input, refused
    the same way by every store (before, SQLite said ValueError, PostgreSQL ConfigError and
    Redis quietly deleted nothing, so a typo in a retention job went unnoticed there)."""
    if status not in TERMINAL:
        raise ValueError(f"prune deletes only done, failed or cancelled jobs, not {status!r}")


def check_search(cursor: int | None, limit: int) -> None:
    limits.check_page(limit)
    if cursor is not None:
        limits.check_int(cursor, "cursor", low=0, high=limits.MAX_JOB_ID)


def sql_search_params(filter: JobFilter, cursor: int | None, limit: int) -> dict[str, Any]:
    """Checked parameters of the SQL stores' ``search_jobs_{asc,desc}`` named queries (no
    cursor means from the newest, or from the oldest, job)."""
    check_search(cursor, limit)
    start = limits.MAX_JOB_ID if filter.newest_first else 0
    return {
        "status": filter.status, "queue": filter.queue, "task": filter.task,
        "since": filter.since, "limit": limit, "cursor": start if cursor is None else cursor,
    }
