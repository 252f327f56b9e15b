"""Maintenance and inspection for the PostgreSQL store (the statements of ``admin.sql``):
housekeeping and pruning, leader leases, job listings, worker rows.

None of these is on a worker's hot path; each is one statement (housekeeping: a bounded
delete, then a VACUUM only when the statistics say it pays).
"""

from __future__ import annotations

from typing import cast

from tether import _limits as limits
from tether._errors import ConfigError
from tether.stores._contract import (
    TERMINAL,
    JobRecord,
    JobStatus,
    Leadership,
    QueueCount,
    WorkerInfo,
)
from tether.stores._postgres.plumbing import Plumbing, Row

#: Request records are kept at least this long (seconds) before housekeeping deletes them.
REQUEST_TTL = 24 * 3600.0


class Admin(Plumbing):
    """Maintenance and inspection methods of the PostgreSQL store."""

    vacuum_threshold: int

    def housekeeping(self) -> str | None:
        """Delete request records older than REQUEST_TTL, then VACUUM the jobs table when
        claims have left enough dead row versions (see the protocol's docstring)."""
        done: list[str] = []
        with self._connector.connection() as pooled:
            old = pooled.execute(self.queries["prune_requests"],
                                 {"keep": REQUEST_TTL, "limit": 10_000}).rowcount
        if old > 0:
            done.append(f"deleted {old} request record(s)")
        row = self._one("dead_tuples", {})
        dead = int(row[0]) if row else 0
        if dead >= self.vacuum_threshold:
            with self._connector.connection() as pooled:
                pooled.execute(self.queries["vacuum_jobs"])
            done.append(f"vacuumed jobs ({dead} dead row versions)")
        return "; ".join(done) or None

    def prune(
        self, status: JobStatus, older_than: float, *, now: float | None = None, limit: int = 1000
    ) -> int:
        if status not in TERMINAL:
            raise ConfigError(f"prune only deletes finished jobs, not {status!r} ones")
        if limit <= 0:
            return 0
        params = {"status": status, "older_than": older_than, "now": now, "limit": limit}
        with self._connector.connection() as conn:
            return conn.execute(self.queries["prune"], params).rowcount

    def leader_acquire(
        self, name: str, holder: str, ttl: float, *, now: float | None = None
    ) -> Leadership | None:
        row = self._one("leader_acquire", {"name": name, "holder": holder, "ttl": ttl, "now": now})
        return _leadership(row)

    def leader_renew(
        self, name: str, holder: str, term: int, ttl: float, *, now: float | None = None
    ) -> Leadership | None:
        params = {"name": name, "holder": holder, "term": term, "ttl": ttl, "now": now}
        return _leadership(self._one("leader_renew", params))

    def leader_release(self, name: str, holder: str, term: int) -> bool:
        row = self._one("leader_release", {"name": name, "holder": holder, "term": term})
        return row is not None

    def leader_get(self, name: str) -> Leadership | None:
        """The current holder of ``name`` (expired or not); None when nobody holds it."""
        return _leadership(self._one("leader_get", {"name": name}))

    # -- inspection ----------------------------------------------------------------------------
    def get_job(self, job_id: int) -> JobRecord | None:
        row = self._one("get_job", {"id": limits.check_job_id(job_id)})
        return None if row is None else JobRecord(*row)

    def list_jobs(
        self,
        *,
        status: JobStatus | None = None,
        queue: str | None = None,
        after_id: int | None = None,
        limit: int = 100,
    ) -> list[JobRecord]:
        limits.check_page(limit)
        params = {"status": status, "queue": queue, "after_id": after_id, "limit": limit}
        return [JobRecord(*row) for row in self._rows("list_jobs", params)]

    def counts(self) -> list[QueueCount]:
        return [QueueCount(q, cast(JobStatus, s), int(n)) for q, s, n in self._rows("counts", {})]

    def register_worker(self, worker: WorkerInfo, *, now: float | None = None) -> None:
        params = {
            "id": worker.id,
            "host": worker.host,
            "pid": worker.pid,
            "queues": list(worker.queues),
            "concurrency": worker.concurrency,
            "now": now,
        }
        self._rows("register_worker", params)

    def unregister_worker(self, worker_id: str) -> None:
        self._rows("unregister_worker", {"id": worker_id})

    def list_workers(self) -> list[WorkerInfo]:
        return [
            WorkerInfo(str(i), str(h), int(p), tuple(q), int(c), float(s), float(seen))
            for i, h, p, q, c, s, seen in self._rows("list_workers", {})
        ]


def _leadership(row: Row | None) -> Leadership | None:
    if row is None:
        return None
    name, holder, term, expires_at = row
    return Leadership(str(name), str(holder), int(term), float(expires_at))


__all__ = ["REQUEST_TTL", "Admin"]
