"""The producer side of the memory store (the :class:`~tether.stores._contract.Producer` role):
enqueue, cancel, read a job, wait for results, and the async producer (``aio.py``).

Waiters are woken by the change itself (finish, cancel, reap bump the shared generation under
the lock), never by a poll. An ``enqueue`` with a request id is answered from a record kept
24 h when repeated. Jobs with ``after`` (issue #20) are checked against the stored jobs before
anything of the batch is written; their links are kept by ``links.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tether import _clock as clock
from tether._errors import JobNotFound
from tether._limits import check_job_id, check_jobs, check_page
from tether.stores._contract import (
    TERMINAL,
    AsyncProducer,
    CancelResult,
    JobLinks,
    JobRecord,
    NewJob,
)
from tether.stores._memory.aio import MemoryAsyncProducer
from tether.stores._memory.state import REQUEST_TTL, Shared, checked_request_id


class MemoryProducer:
    """The :class:`~tether.stores._contract.Producer` role of :class:`MemoryStore`."""

    _shared: Shared | None

    @property
    def _db(self) -> Shared:
        raise NotImplementedError  # pragma: no cover - MemoryStore provides it

    _producer: MemoryAsyncProducer | None = None

    def enqueue(
        self, jobs: Sequence[NewJob], *, now: float | None = None, request_id: str | None = None,
    ) -> list[int]:
        check_jobs(jobs)
        request_id = checked_request_id(request_id)
        if not jobs:
            return []
        with self._db.tx() as db:
            t = db.now(now)
            if request_id is not None:
                seen = db.requests.get(("enqueue", request_id))
                if seen is not None and seen[1] > t - REQUEST_TTL:
                    return list(seen[0])
            for job in jobs:  # all or nothing: every parent must exist before any insert
                for parent in job.after:
                    if parent not in db.jobs:
                        raise JobNotFound(parent)
            ids = [db.insert(job, t) for job in jobs]
            if request_id is not None:
                db.requests[("enqueue", request_id)] = (ids, t)
            db.changed()
            return ids

    def cancel(self, job_id: int, *, now: float | None = None) -> CancelResult:
        job_id = check_job_id(job_id)
        with self._db.tx() as db:
            job = db.jobs.get(job_id)
            if job is None:
                raise JobNotFound(job_id)
            if job.status in ("pending", "waiting"):  # put() cancels its waiting children
                db.put(replace(job, status="cancelled", finished_at=db.now(now)))
                db.changed()
                return "cancelled"
            if job.status == "running":
                db.put(replace(job, cancel_requested=True))
                db.signal(job.locked_by)  # its holder heartbeats now (wait_for_signal)
                db.changed()
                return "requested"
            return "finished"

    def get_job(self, job_id: int) -> JobRecord | None:
        job_id = check_job_id(job_id)
        with self._db.tx() as db:
            return db.jobs.get(job_id)

    def get_jobs(self, job_ids: Sequence[int]) -> list[JobRecord]:
        if not job_ids:
            return []
        check_page(len(job_ids))
        wanted = dict.fromkeys(check_job_id(i) for i in job_ids)
        with self._db.tx() as db:
            return [job for i in wanted if (job := db.jobs.get(i)) is not None]

    def job_links(self, job_id: int) -> JobLinks:
        job_id = check_job_id(job_id)
        with self._db.tx() as db:
            job = db.jobs.get(job_id)
            if job is None:
                raise JobNotFound(job_id)
            return db.links.read(job)

    def finished_ids(self, job_ids: Sequence[int]) -> bool:
        """True when one of ``job_ids`` is terminal or gone (call with the lock held)."""
        db = self._db
        return any((job := db.jobs.get(i)) is None or job.status in TERMINAL for i in job_ids)

    def wait_for_finish(self, job_ids: Sequence[int], timeout: float) -> bool:
        """Block until one of ``job_ids`` is terminal (or gone); True when that happened
        before ``timeout``. Woken by the change itself (finish, cancel, reap)."""
        job_ids = [check_job_id(i) for i in job_ids]
        db = self._shared
        if db is None:
            return False
        deadline = clock.monotonic() + max(0.0, timeout)
        with db.lock:
            while self._shared is not None and not self.finished_ids(job_ids):
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    return False
                db.lock.wait(remaining)
            return self._shared is not None

    def async_producer(self) -> AsyncProducer:
        if self._shared is None:
            from tether.stores._memory.state import closed_error

            raise closed_error()
        if self._producer is None:
            self._producer = MemoryAsyncProducer(self)
        return self._producer

    def _close_producer(self) -> None:
        self._producer = None


__all__ = ["MemoryProducer"]
