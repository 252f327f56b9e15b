"""The operator's side of the SQLite store (the :class:`~tether.stores._contract.Admin` role):
listings, search, counts, worker rows, dead-letter retry, purge, pause and resume.

Same rules as every write of the store: ``BEGIN IMMEDIATE``, SQL in ``queries.sql`` and
``ops.sql``, ``now=None`` means SQLite's clock. The ``paused_queues`` table is made by the
first pause (in the same write) rather than by a schema version, so the schema's version and
its upgrade steps are untouched; until then, reads see no paused queue.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tether import _limits as limits
from tether._limits import check_job_id, check_page
from tether.stores._contract import (
    TERMINAL,
    JobFilter,
    JobRecord,
    JobStatus,
    QueueCount,
    RetryResult,
    WorkerInfo,
)
from tether.stores._opsargs import check_purge, sql_search_params
from tether.stores._sqlite.connection import Connections, guarded
from tether.stores._sqlite.links import resolve, unlink
from tether.stores._sqlite.rows import OPS, Q, job_from_row, store_now

PURGE_BATCH = 1000


class SQLiteAdmin:
    """The :class:`~tether.stores._contract.Admin` role of :class:`SQLiteStore` (its producer
    methods are :class:`SQLiteProducer`'s)."""

    _db: Connections

    if TYPE_CHECKING:
        def notify(self, queues: Sequence[str]) -> None: ...  # SQLiteLeases'

        def signal_local(self) -> None: ...  # SQLiteLeases'

        def _announce_finished(self) -> None: ...  # SQLiteProducer's

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
    def search_jobs(
        self, filter: JobFilter, *, cursor: int | None = None, limit: int = 100
    ) -> list[JobRecord]:
        params = sql_search_params(filter, cursor, limit)
        sql = OPS["search_jobs_desc" if filter.newest_first else "search_jobs_asc"]
        return [job_from_row(row) for row in self._db.get().execute(sql, params)]

    @guarded
    def counts(self) -> list[QueueCount]:
        return [QueueCount(*row) for row in self._db.get().execute(Q["counts"])]

    @guarded
    def list_workers(self) -> list[WorkerInfo]:
        return [
            WorkerInfo(row[0], row[1], row[2], tuple(json.loads(row[3])), row[4], row[5], row[6])
            for row in self._db.get().execute(Q["list_workers"])
        ]

    @guarded
    def retry_failed(
        self, job_ids: Sequence[int] | None, *, now: float | None = None
    ) -> RetryResult:
        ids = None if job_ids is None else json.dumps([check_job_id(i) for i in job_ids])
        if ids == "[]":
            return RetryResult(0)
        params: dict[str, Any] = {"ids": ids, "now": now}
        with self._db.write() as conn:
            params["now"] = store_now(conn, now)
            moved: int = conn.execute(Q["retry_failed"], params).rowcount
            conflicts = conn.execute(Q["retry_conflicts"], params).fetchall()
        if moved:
            self.notify(())
        return RetryResult(moved, tuple(row[0] for row in conflicts))

    @guarded
    def purge(self, queue: str, statuses: Sequence[JobStatus]) -> int:
        chosen = check_purge(queue, statuses)
        if not chosen:
            return 0
        total = 0
        woke = cancelled = False
        while True:
            with self._db.write() as conn:
                rows = conn.execute(OPS["purge"], {"queue": queue, "statuses": json.dumps(chosen),
                                                   "limit": PURGE_BATCH}).fetchall()
                unlink(conn, [row[0] for row in rows])
                # A deleted job with children that had not ended can never be done: its
                # waiting children are cancelled (links.py); one that ended resolved its links.
                ended = [[row[0], "purged"] for row in rows if row[2] and row[1] not in TERMINAL]
                if ended:
                    released, doomed = resolve(conn, ended, store_now(conn, None))
                    woke, cancelled = woke or released, cancelled or doomed
            total += len(rows)
            if len(rows) < PURGE_BATCH:
                break
        if woke:
            self.notify(())
        if cancelled:
            self._announce_finished()
        return total

    @guarded
    def pause_queue(self, queue: str) -> bool:
        limits.check_text(queue, "queue", limit=limits.MAX_NAME)
        with self._db.write() as conn:
            conn.execute(OPS["create_paused_queues"])
            t = store_now(conn, None)
            paused = conn.execute(OPS["pause_queue"], {"queue": queue, "now": t}).rowcount > 0
        if paused:
            self.signal_local()  # waiters in this process look now (others see the commit)
        return paused

    @guarded
    def resume_queue(self, queue: str) -> bool:
        limits.check_text(queue, "queue", limit=limits.MAX_NAME)
        with self._db.write() as conn:
            conn.execute(OPS["create_paused_queues"])
            return conn.execute(OPS["resume_queue"], {"queue": queue}).rowcount > 0

    @guarded
    def paused_queues(self) -> list[str]:
        try:
            return [row[0] for row in self._db.get().execute(OPS["paused_queues"])]
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise
