"""Operations methods of the PostgreSQL store (issue #11), a mixin of PostgresStore.

All SQL is in ``ops.sql``, bound to the store's schema like every statement of the store
(``statements.py``). The ``paused_queues`` table is made by the first pause or resume
(``CREATE TABLE IF NOT EXISTS``), so no migration is needed and the schema's version is
untouched; until it exists, no queue is paused. Purge deletes in bounded batches so one call
never holds a lock on a million rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether import _limits as limits
from tether.stores._contract import JobFilter, JobRecord, JobStatus, Leadership
from tether.stores._opsargs import check_purge, sql_search_params
from tether.stores._postgres.connection import Connector

PURGE_BATCH = 1000


class OpsMixin:
    _connector: Connector
    queries: dict[str, str]  # the store's statements, ops.sql's among them (statements.py)
    _paused_table = False  # set once the table is known to exist (it is never dropped)

    def _ops(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        with self._connector.connection() as pooled:
            return pooled.execute(self.queries[name], params).fetchall()

    def _ensure_paused_table(self) -> None:
        if not self._paused_table:
            with self._connector.connection() as pooled:
                pooled.execute(self.queries["create_paused_queues"])
            self._paused_table = True

    def search_jobs(
        self, filter: JobFilter, *, cursor: int | None = None, limit: int = 100
    ) -> list[JobRecord]:
        params = sql_search_params(filter, cursor, limit)
        name = "search_jobs_desc" if filter.newest_first else "search_jobs_asc"
        return [JobRecord(*row) for row in self._ops(name, params)]

    def purge(self, queue: str, statuses: Sequence[JobStatus]) -> int:
        chosen = check_purge(queue, statuses)
        if not chosen:
            return 0
        total = 0
        while True:
            n = len(self._ops("purge", {"queue": queue, "statuses": chosen,
                                        "limit": PURGE_BATCH}))
            total += n
            if n < PURGE_BATCH:
                return total

    def pause_queue(self, queue: str) -> bool:
        limits.check_text(queue, "queue", limit=limits.MAX_NAME)
        self._ensure_paused_table()
        return bool(self._ops("pause_queue", {"queue": queue}))

    def resume_queue(self, queue: str) -> bool:
        limits.check_text(queue, "queue", limit=limits.MAX_NAME)
        self._ensure_paused_table()
        resumed = bool(self._ops("resume_queue", {"queue": queue}))
        if resumed:
            self.notify([queue])  # type: ignore[attr-defined]
        return resumed

    def paused_queues(self) -> list[str]:
        if not self._paused_table:
            if not self._ops("has_paused_queues", {})[0][0]:
                return []
            self._paused_table = True
        return [str(row[0]) for row in self._ops("paused_queues", {})]

    def delete_dead_workers(self, older_than: float, *, now: float | None = None) -> int:
        return len(self._ops("delete_dead_workers",
                             {"now": now, "older_than": float(older_than)}))

    def leader(self, name: str, *, now: float | None = None) -> Leadership | None:
        rows = self._ops("leader", {"name": name, "now": now})
        if not rows:
            return None
        n, holder, term, expires = rows[0]
        return Leadership(str(n), str(holder), int(term), float(expires))
