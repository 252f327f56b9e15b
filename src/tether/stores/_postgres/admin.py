"""The operator's side of the PostgreSQL store (the :class:`~tether.stores._contract.Admin`
role): listings, search, counts, worker rows, dead-letter retry, purge, pause and resume.

Statements are in ``admin.sql``, ``ops.sql`` and ``queries.sql``, bound to the store's schema
like every statement of the store (``statements.py``). The ``paused_queues`` table is made by
the first pause or resume (``CREATE TABLE IF NOT EXISTS``), so no migration is needed and the
schema's version is untouched; until it exists, no queue is paused. Purge deletes in bounded
batches so one call never holds a lock on a million rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from tether import _limits as limits
from tether.stores._contract import (
    JobFilter,
    JobRecord,
    JobStatus,
    QueueCount,
    RetryResult,
    WorkerInfo,
)
from tether.stores._opsargs import check_purge, sql_search_params
from tether.stores._postgres.plumbing import Plumbing, race

PURGE_BATCH = 1000


class PostgresAdmin(Plumbing):
    """The :class:`~tether.stores._contract.Admin` role of :class:`PostgresStore` (its producer
    methods are :class:`PostgresProducer`'s)."""

    _paused_table = False  # set once the table is known to exist (it is never dropped)

    if TYPE_CHECKING:
        def notify(self, queues: Sequence[str]) -> None: ...  # PostgresLeases'

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

    def search_jobs(
        self, filter: JobFilter, *, cursor: int | None = None, limit: int = 100
    ) -> list[JobRecord]:
        params = sql_search_params(filter, cursor, limit)
        name = "search_jobs_desc" if filter.newest_first else "search_jobs_asc"
        return [JobRecord(*row) for row in self._rows(name, params)]

    def counts(self) -> list[QueueCount]:
        return [QueueCount(q, cast(JobStatus, s), int(n)) for q, s, n in self._rows("counts", {})]

    def list_workers(self) -> list[WorkerInfo]:
        return [
            WorkerInfo(str(i), str(h), int(p), tuple(q), int(c), float(s), float(seen))
            for i, h, p, q, c, s, seen in self._rows("list_workers", {})
        ]

    def retry_failed(
        self, job_ids: Sequence[int] | None, *, now: float | None = None
    ) -> RetryResult:
        params: dict[str, Any] = {"now": now, "channel": self.channel}
        if job_ids is None:
            name = "retry_failed_all"
        else:
            ids = [limits.check_job_id(job_id) for job_id in job_ids]
            if not ids:
                return RetryResult(0)
            name, params["ids"] = "retry_failed_ids", ids
        [(retried, conflicts, _)] = self._retrying(name, params, None, race)
        return RetryResult(int(retried), tuple(int(i) for i in conflicts))

    def _ensure_paused_table(self) -> None:
        if not self._paused_table:
            with self._connector.connection() as pooled:
                pooled.execute(self.queries["create_paused_queues"])
            self._paused_table = True

    def purge(self, queue: str, statuses: Sequence[JobStatus]) -> int:
        chosen = check_purge(queue, statuses)
        if not chosen:
            return 0
        total = 0
        while True:
            n = len(self._rows("purge", {"queue": queue, "statuses": chosen,
                                        "limit": PURGE_BATCH, "done": self.done_channel,
                                        "channel": self.channel}))
            total += n
            if n < PURGE_BATCH:
                return total

    def pause_queue(self, queue: str) -> bool:
        limits.check_text(queue, "queue", limit=limits.MAX_NAME)
        self._ensure_paused_table()
        return bool(self._rows("pause_queue", {"queue": queue, "signal": self.signal_channel}))

    def resume_queue(self, queue: str) -> bool:
        limits.check_text(queue, "queue", limit=limits.MAX_NAME)
        self._ensure_paused_table()
        resumed = bool(self._rows("resume_queue", {"queue": queue}))
        if resumed:
            self.notify([queue])
        return resumed

    def paused_queues(self) -> list[str]:
        if not self._paused_table:
            if not self._rows("has_paused_queues", {})[0][0]:
                return []
            self._paused_table = True
        return [str(row[0]) for row in self._rows("paused_queues", {})]


__all__ = ["PURGE_BATCH", "PostgresAdmin"]
