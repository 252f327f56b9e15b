"""Maintenance, leadership and inspection methods of the SQLite store (a mixin of SQLiteStore).

Same rules as ``store.py``: every write in ``BEGIN IMMEDIATE``, all SQL in ``queries.sql``,
``now=None`` means SQLite's clock.
"""

from __future__ import annotations

import json

from tether._limits import check_job_id, check_page
from tether.stores._contract import (
    TERMINAL,
    JobRecord,
    JobStatus,
    Leadership,
    QueueCount,
    WorkerInfo,
)
from tether.stores._sqlite.connection import Connections, guarded
from tether.stores._sqlite.rows import Q, job_from_row, store_now

#: How long a request id protects a call against replays (base contract: 24 h).
REQUEST_TTL = 86_400.0
_PRUNE_BATCH = 10_000


class AdminMixin:
    """Everything off the lease hot path: prune, leader leases, workers, inspection."""

    _db: Connections

    @guarded
    def housekeeping(self) -> str | None:
        """Delete request records (replay protection of enqueue/claim) older than 24 h.

        Indexes need nothing: SQLite deletes index entries in place (no MVCC versions), so
        claims never walk past old ones. The maintainer calls this every few seconds, so the
        write lock is taken only when a plain read (one index probe) finds records due."""
        conn = self._db.get()
        t = store_now(conn, None)
        cutoff = t - REQUEST_TTL
        oldest = conn.execute(Q["requests_oldest"]).fetchone()[0]
        if oldest is None or oldest >= cutoff:
            return None
        with self._db.write() as conn:
            deleted: int = conn.execute(
                Q["requests_prune"], {"cutoff": cutoff, "limit": _PRUNE_BATCH}
            ).rowcount
        return f"deleted {deleted} request records older than 24 h" if deleted else None

    @guarded
    def prune(
        self, status: JobStatus, older_than: float, *, now: float | None = None, limit: int = 1000
    ) -> int:
        if status not in TERMINAL:
            raise ValueError(f"prune only deletes terminal jobs, not {status!r}")
        if limit <= 0:
            return 0
        with self._db.write() as conn:
            t = store_now(conn, now)
            deleted: int = conn.execute(
                Q["prune"], {"status": status, "cutoff": t - older_than, "limit": limit}
            ).rowcount
        return deleted

    @guarded
    def leader_acquire(
        self, name: str, holder: str, ttl: float, *, now: float | None = None
    ) -> Leadership | None:
        with self._db.write() as conn:
            t = store_now(conn, now)
            row = conn.execute(
                Q["leader_acquire"], {"name": name, "holder": holder, "ttl": ttl, "now": t}
            ).fetchone()
        return None if row is None else Leadership(*row)

    @guarded
    def leader_renew(
        self, name: str, holder: str, term: int, ttl: float, *, now: float | None = None
    ) -> Leadership | None:
        with self._db.write() as conn:
            t = store_now(conn, now)
            row = conn.execute(
                Q["leader_renew"],
                {"name": name, "holder": holder, "term": term, "ttl": ttl, "now": t},
            ).fetchone()
        return None if row is None else Leadership(*row)

    @guarded
    def leader_release(self, name: str, holder: str, term: int) -> bool:
        with self._db.write() as conn:
            changed: int = conn.execute(
                Q["leader_release"], {"name": name, "holder": holder, "term": term}
            ).rowcount
        return changed == 1

    @guarded
    def leader_get(self, name: str) -> Leadership | None:
        row = self._db.get().execute(Q["leader_get"], {"name": name}).fetchone()
        return None if row is None else Leadership(*row)

    # -- inspection --------------------------------------------------------------------------
    @guarded
    def get_job(self, job_id: int) -> JobRecord | None:
        row = self._db.get().execute(Q["get_job"], {"id": check_job_id(job_id)}).fetchone()
        return None if row is None else job_from_row(row)

    @guarded
    def list_jobs(
        self,
        *,
        status: JobStatus | None = None,
        queue: str | None = None,
        after_id: int | None = None,
        limit: int = 100,
    ) -> list[JobRecord]:
        params = {
            "status": status,
            "queue": queue,
            "after_id": after_id if after_id is not None else 0,
            "limit": check_page(limit),
        }
        return [job_from_row(row) for row in self._db.get().execute(Q["list_jobs"], params)]

    @guarded
    def counts(self) -> list[QueueCount]:
        return [QueueCount(*row) for row in self._db.get().execute(Q["counts"])]

    @guarded
    def register_worker(self, worker: WorkerInfo, *, now: float | None = None) -> None:
        params = {
            "id": worker.id,
            "host": worker.host,
            "pid": worker.pid,
            "queues": json.dumps(list(worker.queues)),
            "concurrency": worker.concurrency,
            "now": now,
        }
        with self._db.write() as conn:
            params["now"] = store_now(conn, now)
            conn.execute(Q["register_worker"], params)

    @guarded
    def unregister_worker(self, worker_id: str) -> None:
        with self._db.write() as conn:
            conn.execute(Q["unregister_worker"], {"id": worker_id})

    @guarded
    def list_workers(self) -> list[WorkerInfo]:
        return [
            WorkerInfo(row[0], row[1], row[2], tuple(json.loads(row[3])), row[4], row[5], row[6])
            for row in self._db.get().execute(Q["list_workers"])
        ]
