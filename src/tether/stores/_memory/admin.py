"""The operator's side of the memory store (the :class:`~tether.stores._contract.Admin` role):
listings, search, counts, worker rows, dead-letter retry, purge, pause and resume.

Same rules as every method of the store: one step under the shared lock per call, ``now=None``
means the store's clock, and the argument checks every store shares (:mod:`tether._limits`,
:mod:`tether.stores._opsargs`) run first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tether import _limits as limits
from tether._limits import check_job_id, check_page
from tether.stores._contract import (
    JobFilter,
    JobRecord,
    JobStatus,
    QueueCount,
    RetryResult,
    WorkerInfo,
)
from tether.stores._memory.state import Shared
from tether.stores._opsargs import check_purge, check_search


class MemoryAdmin:
    """The :class:`~tether.stores._contract.Admin` role of :class:`MemoryStore` (its producer
    methods are :class:`MemoryProducer`'s)."""

    _shared: Shared | None

    @property
    def _db(self) -> Shared:
        raise NotImplementedError  # pragma: no cover - MemoryStore provides it

    def list_jobs(
        self, *, status: JobStatus | None = None, queue: str | None = None,
        after_id: int | None = None, limit: int = 100,
    ) -> list[JobRecord]:
        limit = check_page(limit)
        after = after_id if after_id is not None else 0
        with self._db.tx() as db:
            found = []
            for job_id, job in db.jobs.items():  # ascending ids (see Shared.jobs)
                if job_id <= after:
                    continue
                if (status is None or job.status == status) and (queue is None
                                                                  or job.queue == queue):
                    found.append(job)
                    if len(found) == limit:
                        break
            return found

    def search_jobs(
        self, filter: JobFilter, *, cursor: int | None = None, limit: int = 100
    ) -> list[JobRecord]:
        check_search(cursor, limit)
        with self._db.tx() as db:
            ids = list(reversed(db.jobs)) if filter.newest_first else list(db.jobs)
            if cursor is not None:
                ids = [i for i in ids if (i < cursor if filter.newest_first else i > cursor)]
            found = []
            for job_id in ids:
                job = db.jobs[job_id]
                if ((filter.status is None or job.status == filter.status)
                        and (filter.queue is None or job.queue == filter.queue)
                        and (filter.task is None or job.task == filter.task)
                        and (filter.since is None or job.created_at >= filter.since)):
                    found.append(job)
                    if len(found) == limit:
                        break
            return found

    def counts(self) -> list[QueueCount]:
        with self._db.tx() as db:
            tally: dict[tuple[str, JobStatus], int] = {}
            for job in db.jobs.values():
                tally[(job.queue, job.status)] = tally.get((job.queue, job.status), 0) + 1
        return [QueueCount(q, s, n) for (q, s), n in sorted(tally.items())]

    def list_workers(self) -> list[WorkerInfo]:
        with self._db.tx() as db:
            return sorted(db.workers.values(), key=lambda w: (w.started_at, w.id))

    def retry_failed(
        self, job_ids: Sequence[int] | None, *, now: float | None = None
    ) -> RetryResult:
        wanted = None if job_ids is None else [check_job_id(i) for i in job_ids]
        if wanted == []:
            return RetryResult(0)
        with self._db.tx() as db:
            t = db.now(now)
            ids = sorted(db.jobs) if wanted is None else sorted(set(wanted))
            moved, conflicts = 0, []
            for job_id in ids:
                job = db.jobs.get(job_id)
                if job is None or job.status != "failed":
                    continue
                if job.unique_key is not None and job.unique_key in db.live_keys:
                    conflicts.append(job_id)  # held by a live job (or by a twin retried now)
                    continue
                db.put(replace(job, status="pending", run_at=t, failures=0, stall_count=0,
                               failure_reason=None, finished_at=None, cancel_requested=False,
                               lease_token=None))
                moved += 1
            if moved:
                db.changed()
        return RetryResult(moved, tuple(conflicts))

    def purge(self, queue: str, statuses: Sequence[JobStatus]) -> int:
        chosen = check_purge(queue, statuses)
        if not chosen:
            return 0
        with self._db.tx() as db:
            t = db.now()
            gone = [j.id for j in db.jobs.values() if j.queue == queue and j.status in chosen]
            for job_id in gone:
                # frees the unique keys of live jobs it deletes; cancels their waiting children
                db.delete(job_id, t)
            if gone:
                db.changed()
            return len(gone)

    def pause_queue(self, queue: str) -> bool:
        limits.check_text(queue, "queue", limit=limits.MAX_NAME)
        with self._db.tx() as db:
            if queue in db.paused:
                return False
            db.paused[queue] = db.now()
            db.signal(None)  # every worker re-reads the paused set now (wait_for_signal)
            db.changed()
            return True

    def resume_queue(self, queue: str) -> bool:
        limits.check_text(queue, "queue", limit=limits.MAX_NAME)
        with self._db.tx() as db:
            if db.paused.pop(queue, None) is None:
                return False
            db.changed()  # wakes the queue's workers
            return True

    def paused_queues(self) -> list[str]:
        with self._db.tx() as db:
            return sorted(db.paused)


__all__ = ["MemoryAdmin"]
