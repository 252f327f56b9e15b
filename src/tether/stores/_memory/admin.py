"""Maintenance, leadership, inspection and operations methods of the memory store (a mixin of
:class:`~tether.stores._memory.store.MemoryStore`).

Same rules as ``store.py``: one step under the shared lock per call, ``now=None`` means the
store's clock, and the argument checks every store shares (:mod:`tether._limits`,
:mod:`tether.stores._opsargs`) run first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tether import _limits as limits
from tether._limits import check_job_id, check_page
from tether.stores._contract import (
    TERMINAL,
    JobFilter,
    JobRecord,
    JobStatus,
    Leadership,
    QueueCount,
    WorkerInfo,
)
from tether.stores._memory.state import REQUEST_TTL, Shared
from tether.stores._opsargs import check_purge, check_search


class AdminMixin:
    """Everything off the lease hot path."""

    @property
    def _db(self) -> Shared:
        raise NotImplementedError  # pragma: no cover - MemoryStore provides it

    # -- maintenance -------------------------------------------------------------------------
    def housekeeping(self) -> str | None:
        """Forget request records (replay protection) older than 24 h; jobs are untouched."""
        with self._db.tx() as db:
            cutoff = db.now() - REQUEST_TTL
            old = [key for key, (_, at) in db.requests.items() if at < cutoff]
            for key in old:
                del db.requests[key]
        return f"deleted {len(old)} request records older than 24 h" if old else None

    def prune(
        self, status: JobStatus, older_than: float, *, now: float | None = None, limit: int = 1000
    ) -> int:
        if status not in TERMINAL:
            raise ValueError(f"prune only deletes terminal jobs, not {status!r}")
        if limit <= 0:
            return 0
        with self._db.tx() as db:
            cutoff = db.now(now) - older_than
            old = sorted(
                (j for j in db.jobs.values()
                 if j.status == status and j.finished_at is not None and j.finished_at < cutoff),
                key=lambda j: (j.finished_at or 0.0, j.id))[:limit]
            for job in old:
                db.delete(job.id)
            if old:
                db.changed()
            return len(old)

    # -- leadership --------------------------------------------------------------------------
    def leader_acquire(
        self, name: str, holder: str, ttl: float, *, now: float | None = None
    ) -> Leadership | None:
        with self._db.tx() as db:
            t = db.now(now)
            row = db.leaders.get(name)
            if row is None:
                db.leaders[name] = (holder, 1, t + ttl)
            else:
                current, term, expires = row
                if current == holder and expires > t:
                    pass  # the acting holder gets its leadership back unchanged
                elif current is None or expires <= t or current == holder:
                    db.leaders[name] = (holder, term + 1, t + ttl)
                else:
                    return None
            held, term, expires = db.leaders[name]
            return Leadership(name, held or holder, term, expires)

    def leader_renew(
        self, name: str, holder: str, term: int, ttl: float, *, now: float | None = None
    ) -> Leadership | None:
        with self._db.tx() as db:
            t = db.now(now)
            row = db.leaders.get(name)
            if row is None or row[0] != holder or row[1] != term or row[2] <= t:
                return None
            db.leaders[name] = (holder, term, t + ttl)
            return Leadership(name, holder, term, t + ttl)

    def leader_release(self, name: str, holder: str, term: int) -> bool:
        with self._db.tx() as db:
            row = db.leaders.get(name)
            if row is None or row[0] != holder or row[1] != term:
                return False
            db.leaders[name] = (None, term, 0.0)  # the term keeps growing
            return True

    def leader_get(self, name: str) -> Leadership | None:
        with self._db.tx() as db:
            row = db.leaders.get(name)
            if row is None or row[0] is None:
                return None
            return Leadership(name, row[0], row[1], row[2])

    def leader(self, name: str, *, now: float | None = None) -> Leadership | None:
        with self._db.tx() as db:
            return db.leader_row(name, db.now(now))

    # -- inspection --------------------------------------------------------------------------
    def get_job(self, job_id: int) -> JobRecord | None:
        job_id = check_job_id(job_id)
        with self._db.tx() as db:
            return db.jobs.get(job_id)

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

    def counts(self) -> list[QueueCount]:
        with self._db.tx() as db:
            tally: dict[tuple[str, JobStatus], int] = {}
            for job in db.jobs.values():
                tally[(job.queue, job.status)] = tally.get((job.queue, job.status), 0) + 1
        return [QueueCount(q, s, n) for (q, s), n in sorted(tally.items())]

    def register_worker(self, worker: WorkerInfo, *, now: float | None = None) -> None:
        with self._db.tx() as db:
            t = db.now(now)
            old = db.workers.get(worker.id)
            db.workers[worker.id] = replace(
                worker, queues=tuple(worker.queues),
                started_at=old.started_at if old is not None else t, last_seen=t)

    def unregister_worker(self, worker_id: str) -> None:
        with self._db.tx() as db:
            db.workers.pop(worker_id, None)

    def list_workers(self) -> list[WorkerInfo]:
        with self._db.tx() as db:
            return sorted(db.workers.values(), key=lambda w: (w.started_at, w.id))

    # -- operations (issue #11) ------------------------------------------------------------
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

    def purge(self, queue: str, statuses: Sequence[JobStatus]) -> int:
        chosen = check_purge(queue, statuses)
        if not chosen:
            return 0
        with self._db.tx() as db:
            gone = [j.id for j in db.jobs.values() if j.queue == queue and j.status in chosen]
            for job_id in gone:
                db.delete(job_id)  # frees the unique keys of live jobs it deletes
            if gone:
                db.changed()
            return len(gone)

    def pause_queue(self, queue: str) -> bool:
        limits.check_text(queue, "queue", limit=limits.MAX_NAME)
        with self._db.tx() as db:
            if queue in db.paused:
                return False
            db.paused[queue] = db.now()
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

    def delete_dead_workers(self, older_than: float, *, now: float | None = None) -> int:
        with self._db.tx() as db:
            cutoff = db.now(now) - float(older_than)
            dead = [w for w, info in db.workers.items() if info.last_seen < cutoff]
            for worker_id in dead:
                del db.workers[worker_id]
            return len(dead)
