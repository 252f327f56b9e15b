"""Maintenance on the memory store (the :class:`~tether.stores._contract.Maintenance` role):
reaping, housekeeping, pruning, dead worker rows and leader leases (periodic ticks:
``schedules.py``).

Invariant: **the reaper is one step** under the shared lock: every expired lease (up to the
limit) goes through the stall rule together, so two reapers give the end state one of them
alone would. Same rules as every method of the store: ``now=None`` means the store's clock,
and the argument checks every store shares run first.
"""

from __future__ import annotations

from dataclasses import replace

from tether.stores._contract import REAPED_ERROR, JobRecord, JobStatus, Leadership, Reaped
from tether.stores._memory.rules import error_record
from tether.stores._memory.state import REQUEST_TTL, Shared
from tether.stores._opsargs import check_prune


def stall(db: Shared, jobs: list[JobRecord], t: float) -> list[Reaped]:
    """The stall rule applied to running ``jobs`` (under ``db``'s lock): what the reaper and
    the reap of a dead owner (``liveness.py``) both do."""
    reaped = []
    for job in jobs:
        stalls = job.stall_count + 1
        status: JobStatus
        if job.cancel_requested:
            status, reason = "cancelled", job.failure_reason
        elif stalls < job.max_stalls and job.failures + stalls < job.max_attempts:
            status, reason = "pending", job.failure_reason
        else:
            status, reason = "failed", "stalled"
        db.put(replace(
            job, stall_count=stalls, status=status, failure_reason=reason,
            finished_at=job.finished_at if status == "pending" else t,
            last_error=REAPED_ERROR,
            errors=error_record(job, REAPED_ERROR, "stalled", t),
            locked_by=None, lease_until=None, lease_token=None))
        reaped.append(Reaped(job.id, job.attempt, job.locked_by or "", status, stalls))
    if reaped:
        db.changed()
    return reaped


class MemoryMaintenance:
    """The :class:`~tether.stores._contract.Maintenance` role of :class:`MemoryStore`."""

    _shared: Shared | None

    @property
    def _db(self) -> Shared:
        raise NotImplementedError  # pragma: no cover - MemoryStore provides it

    def reap_expired(
        self, stall_grace: float = 0.0, *, now: float | None = None, limit: int = 1000
    ) -> list[Reaped]:
        if limit <= 0:
            return []
        with self._db.tx() as db:
            t = db.now(now)
            cutoff = t - stall_grace
            expired = sorted((db.jobs[i] for i in db.running
                              if (db.jobs[i].lease_until or 0.0) < cutoff),
                             key=lambda j: (j.lease_until or 0.0, j.id))[:limit]
            reaped = stall(db, expired, t)
        return sorted(reaped, key=lambda r: r.job_id)

    def next_lease_expiry(self) -> float | None:
        with self._db.tx() as db:
            return min((db.jobs[i].lease_until or 0.0 for i in db.running), default=None)

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
        check_prune(status)
        if limit <= 0:
            return 0
        with self._db.tx() as db:
            t = db.now(now)
            cutoff = t - older_than
            old = sorted(
                (j for j in db.jobs.values()
                 if j.status == status and j.finished_at is not None and j.finished_at < cutoff
                 and not db.links.has_live_child(db, j.id)),  # a child will read its result
                key=lambda j: (j.finished_at or 0.0, j.id))[:limit]
            for job in old:
                db.delete(job.id, t)
            if old:
                db.changed()
            return len(old)

    def delete_dead_workers(self, older_than: float, *, now: float | None = None) -> int:
        with self._db.tx() as db:
            cutoff = db.now(now) - float(older_than)
            dead = [w for w, info in db.workers.items() if info.last_seen < cutoff]
            for worker_id in dead:
                del db.workers[worker_id]
            return len(dead)

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


__all__ = ["MemoryMaintenance"]
