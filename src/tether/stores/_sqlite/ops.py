"""Operations methods of the SQLite store (issue #11), a mixin of SQLiteStore.

Same rules as ``store.py``: every write in ``BEGIN IMMEDIATE``, all SQL in ``ops.sql``,
``now=None`` means SQLite's clock. The ``paused_queues`` table is made by the first pause (in
the same write) rather than by a schema version, so the schema's version and its upgrade steps
are untouched; until then, reads see no paused queue.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from tether import _limits as limits
from tether.stores import _queries as queries
from tether.stores._contract import JobFilter, JobRecord, JobStatus, Leadership
from tether.stores._opsargs import check_purge, sql_search_params
from tether.stores._sqlite.connection import Connections, guarded
from tether.stores._sqlite.rows import job_from_row, store_now

OPS = queries.load("tether.stores._sqlite", "ops.sql")
PURGE_BATCH = 1000


class OpsMixin:
    _db: Connections

    @guarded
    def search_jobs(
        self, filter: JobFilter, *, cursor: int | None = None, limit: int = 100
    ) -> list[JobRecord]:
        params = sql_search_params(filter, cursor, limit)
        sql = OPS["search_jobs_desc" if filter.newest_first else "search_jobs_asc"]
        return [job_from_row(row) for row in self._db.get().execute(sql, params)]

    @guarded
    def purge(self, queue: str, statuses: Sequence[JobStatus]) -> int:
        chosen = check_purge(queue, statuses)
        if not chosen:
            return 0
        total = 0
        while True:
            with self._db.write() as conn:
                n = conn.execute(OPS["purge"], {"queue": queue, "statuses": json.dumps(chosen),
                                                "limit": PURGE_BATCH}).rowcount
            total += n
            if n < PURGE_BATCH:
                return total

    @guarded
    def pause_queue(self, queue: str) -> bool:
        limits.check_text(queue, "queue", limit=limits.MAX_NAME)
        with self._db.write() as conn:
            conn.execute(OPS["create_paused_queues"])
            t = store_now(conn, None)
            return conn.execute(OPS["pause_queue"], {"queue": queue, "now": t}).rowcount > 0

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

    @guarded
    def delete_dead_workers(self, older_than: float, *, now: float | None = None) -> int:
        with self._db.write() as conn:
            t = store_now(conn, now)
            return conn.execute(OPS["delete_dead_workers"],
                                {"now": t, "older_than": float(older_than)}).rowcount

    @guarded
    def leader(self, name: str, *, now: float | None = None) -> Leadership | None:
        conn = self._db.get()
        row = conn.execute(OPS["leader"], {"name": name, "now": store_now(conn, now)}).fetchone()
        return None if row is None else Leadership(row[0], row[1], int(row[2]), float(row[3]))
