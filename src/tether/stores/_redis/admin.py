"""The operator's side of the Redis store (the :class:`~tether.stores._contract.Admin` role):
listings, search, counts, worker rows, dead-letter retry, purge, pause and resume.

Nothing here is fenced or on a worker's hot path. Listings and counts are Lua scripts so each
answer is one consistent snapshot (see the scripts for why they are shaped so); search and
purge are bounded scripts (``ops_*.lua``) called in rounds. Paused queues are one set,
``P:paused``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from tether import _limits as limits
from tether._errors import StoreError
from tether.stores._contract import (
    JobFilter,
    JobRecord,
    JobStatus,
    QueueCount,
    RetryResult,
    WorkerInfo,
)
from tether.stores._opsargs import check_purge, check_search
from tether.stores._redis import rows as codec
from tether.stores._redis.calls import request as _request
from tether.stores._redis.connection import io

PURGE_BATCH = 500
SEARCH_BUDGET = 5000  # job hashes examined per script call


class RedisAdmin:
    """The :class:`~tether.stores._contract.Admin` role of :class:`RedisStore` (its producer
    methods are :class:`RedisProducer`'s)."""

    prefix: str
    _client: Any

    if TYPE_CHECKING:  # RedisStore's: run a script (registered at start / on first use)
        def _run(self, name: str, *args: Any) -> Any: ...

        def _ops(self, name: str, *args: str) -> Any: ...

        def _key(self, *parts: str) -> str: ...

        def notify(self, queues: Sequence[str]) -> None: ...  # RedisLeases'

    def list_jobs(
        self,
        *,
        status: JobStatus | None = None,
        queue: str | None = None,
        after_id: int | None = None,
        limit: int = 100,
    ) -> list[JobRecord]:
        limit = limits.check_page(limit)
        after = str(int(after_id)) if after_id is not None else "-inf"
        rows = self._run("list_jobs", status or "", queue or "", after, str(int(limit)))
        return [codec.job_from_flat(row) for row in rows]

    def search_jobs(
        self, filter: JobFilter, *, cursor: int | None = None, limit: int = 100
    ) -> list[JobRecord]:
        check_search(cursor, limit)
        jobs: list[JobRecord] = []
        at = "" if cursor is None else str(int(cursor))
        while True:
            rows, at = self._ops(
                "ops_search", filter.status or "", filter.queue or "", filter.task or "",
                "" if filter.since is None else repr(float(filter.since)), at,
                str(limit - len(jobs)), "1" if filter.newest_first else "0", str(SEARCH_BUDGET))
            jobs += [codec.job_from_flat(row) for row in rows]
            at = at.decode() if isinstance(at, bytes) else str(at)
            if not at or len(jobs) >= limit:
                return jobs

    def counts(self) -> list[QueueCount]:
        flat = self._run("counts")
        return [
            QueueCount(str(flat[i]), cast(JobStatus, flat[i + 1]), int(flat[i + 2]))
            for i in range(0, len(flat), 3)
        ]

    def list_workers(self) -> list[WorkerInfo]:
        with io():
            # No MULTI: at maxmemory Redis refuses every command queued in a MULTI, reads
            # included, and `tether stats` is what the operator runs then. The two reads
            # may straddle a registration: a row without a last_seen shows its start time.
            pipe = self._client.pipeline(transaction=False)
            pipe.hgetall(self._key("workers"))
            pipe.zrange(self._key("workers:seen"), 0, -1, withscores=True)
            rows, seen = pipe.execute()
        last_seen = {str(member): float(score) for member, score in seen}
        workers = []
        for worker_id, text in sorted(rows.items()):
            try:
                d = json.loads(text)
            except ValueError as exc:
                raise StoreError(f"redis worker row {worker_id!r} does not decode: {exc}") from exc
            workers.append(
                WorkerInfo(
                    id=worker_id,
                    host=str(d["host"]),
                    pid=int(d["pid"]),
                    queues=tuple(str(q) for q in d["queues"]),
                    concurrency=int(d["concurrency"]),
                    started_at=float(d["started_at"]),
                    last_seen=last_seen.get(worker_id, float(d["started_at"])),
                )
            )
        return workers

    def retry_failed(
        self, job_ids: Sequence[int] | None, *, now: float | None = None
    ) -> RetryResult:
        ids = None if job_ids is None else [str(limits.check_job_id(i)) for i in job_ids]
        if ids == []:
            return RetryResult(0)
        rid, ttl = _request(None)
        which = ["1"] if ids is None else ["0", *ids]
        moved, conflicts = self._run("retry_failed", codec.now_arg(now), rid, ttl, *which)
        return RetryResult(int(moved), tuple(int(i) for i in conflicts))

    def purge(self, queue: str, statuses: Sequence[JobStatus]) -> int:
        chosen = check_purge(queue, statuses)
        total = 0
        while chosen:
            n = int(self._ops("ops_purge", queue, "\n".join(chosen), str(PURGE_BATCH)))
            total += n
            if n < PURGE_BATCH:
                break
        return total

    def pause_queue(self, queue: str) -> bool:
        limits.check_text(queue, "queue", limit=limits.MAX_NAME)
        with io():
            paused = bool(self._client.sadd(self._key("paused"), queue))
            if paused:  # every worker re-reads the paused set now (wait_for_signal)
                self._client.publish(self._key("signal"), "*")
        return paused

    def resume_queue(self, queue: str) -> bool:
        limits.check_text(queue, "queue", limit=limits.MAX_NAME)
        with io():
            resumed = bool(self._client.srem(self._key("paused"), queue))
        if resumed:
            self.notify([queue])
        return resumed

    def paused_queues(self) -> list[str]:
        with io():
            members = self._client.smembers(self._key("paused"))
        return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)


__all__ = ["PURGE_BATCH", "SEARCH_BUDGET", "RedisAdmin"]
