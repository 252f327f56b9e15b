"""The in-memory store (``memory://NAME``): the whole store contract in one process, for tests
and demos. Nothing survives the process, and no other process can see it.

Invariants this module holds (the contract is :mod:`tether.stores._contract`; the locking and
index rules are in :mod:`tether.stores._memory.state`):

* **Each method is one atomic step** under the shared lock, so the claim is the lease grant
  (status, owner, lease, ``attempt + 1``, token and ``started_at`` set together), and two
  reapers, claimers or finishers give the end state one of them alone would.
* **Every write about a claimed job is fenced** by (id, attempt, owner, token) and
  ``status == "running"`` (:func:`_held`), exactly as the SQL stores' ``WHERE`` clauses.
* **The same input checks as every store** (:mod:`tether._limits`) run before anything is
  written, so the same ``ValueError``/``TypeError`` comes out and a batch is all or nothing.
* **Replays act once**: ``enqueue``/``claim`` with a request id are answered from a record
  kept 24 h; a repeated ``finish`` recognises its applied outcome by the token the row keeps.
* **The store's clock** is :func:`tether._clock.wall` plus :meth:`MemoryStore.advance`'s offset;
  every time-dependent method takes an explicit ``now``.
"""

from __future__ import annotations

import heapq
import secrets
import threading
from collections.abc import Sequence
from dataclasses import replace

from tether import _clock as clock
from tether._errors import JobNotFound
from tether._limits import check_job_id, check_jobs, check_json_text, check_text
from tether.stores._contract import (
    REAPED_ERROR,
    TERMINAL,
    CancelResult,
    HeartbeatResult,
    JobRecord,
    JobStatus,
    Lease,
    NewJob,
    Outcome,
    Reaped,
    RetryResult,
    StoreInfo,
)
from tether.stores._memory.admin import AdminMixin
from tether.stores._memory.aio import AsyncMixin
from tether.stores._memory.rules import apply_outcome, error_record, replayed
from tether.stores._memory.schedules import SchedulesMixin
from tether.stores._memory.state import (
    REQUEST_TTL,
    SCHEMA_VERSION,
    Shared,
    closed_error,
    shared_for,
)

_MAX_REQUEST_ID = 255


def parse_name(url: str) -> str | None:
    """``memory://NAME`` -> NAME; ``memory://`` -> None (a private store)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() != "memory":
        from tether._errors import ConfigError

        raise ConfigError(f"not a memory store URL: {url!r} (use memory://NAME)")
    name = rest.split("?", 1)[0].split("#", 1)[0].strip("/")
    return name or None


def _request_id(value: str | None) -> str | None:
    return None if value is None else check_text(value, "request_id", limit=_MAX_REQUEST_ID)


def _held(db: Shared, lease: Lease) -> JobRecord | None:
    """The row ``lease`` still holds (the fence), or None."""
    job = db.jobs.get(lease.job_id)
    if (job is None or job.status != "running" or job.attempt != lease.attempt
            or job.locked_by != lease.owner or job.lease_token != lease.token):
        return None
    return job


class MemoryStore(SchedulesMixin, AsyncMixin, AdminMixin):
    """In-process implementation of :class:`tether.stores._contract.Store`. Thread-safe.

    Stores opened with the same ``memory://NAME`` in one process share their jobs (a worker
    opens several); ``memory://`` alone is private to this object.
    """

    kind = "memory"

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self.name = parse_name(url)
        self._shared: Shared | None = shared_for(self.name)
        self._local = threading.local()  # per thread: the generation its last wait saw

    def __repr__(self) -> str:
        return f"MemoryStore({self.url!r})"

    @property
    def _db(self) -> Shared:
        db = self._shared
        if db is None:
            raise closed_error()
        return db

    # -- lifecycle -------------------------------------------------------------------------
    def migrate(self) -> int:
        with self._db.tx(migrated=False) as db:
            db.version = SCHEMA_VERSION
            return db.version

    def check_schema(self) -> None:
        with self._db.tx():
            pass

    def close(self) -> None:
        db, self._shared = self._shared, None
        if db is not None:
            with db.lock:
                db.changed()  # wake this store's waiters: they end at once
        self._close_producer()

    def info(self) -> StoreInfo:
        db = self._db
        return StoreInfo(self.kind, self.url, db.version,
                         {"name": self.name or "(private)", "jobs": str(len(db.jobs))})

    def now(self) -> float:
        return self._db.now()

    def advance(self, seconds: float) -> float:
        """Move this store's clock (and every store of its name) ``seconds`` forward; returns
        the new store time. Tests use it to make delayed jobs and retries due at once, and to
        let leases expire, without waiting."""
        if seconds < 0:
            raise ValueError("the store's clock only moves forward")
        with self._db.tx(migrated=False) as db:
            db.offset += float(seconds)
            db.changed()
            return db.now()

    # -- producers -------------------------------------------------------------------------
    def enqueue(
        self, jobs: Sequence[NewJob], *, now: float | None = None, request_id: str | None = None,
    ) -> list[int]:
        check_jobs(jobs)
        request_id = _request_id(request_id)
        if not jobs:
            return []
        with self._db.tx() as db:
            t = db.now(now)
            if request_id is not None:
                seen = db.requests.get(("enqueue", request_id))
                if seen is not None and seen[1] > t - REQUEST_TTL:
                    return list(seen[0])
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
            if job.status == "pending":
                db.put(replace(job, status="cancelled", finished_at=db.now(now)))
                db.changed()
                return "cancelled"
            if job.status == "running":
                db.put(replace(job, cancel_requested=True))
                db.changed()
                return "requested"
            return "finished"

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

    # -- the lease protocol ------------------------------------------------------------------
    def claim(
        self, owner: str, queues: Sequence[str], limit: int, lease_ttl: float, *,
        now: float | None = None, request_id: str | None = None,
    ) -> list[JobRecord]:
        """Claim in one step; every claimed row's token is ``nonce:id``. The nonce is the
        ``request_id`` when given (a repeat returns the jobs still running under it and
        claims nothing more), else 128 fresh random bits."""
        request_id = _request_id(request_id)
        if limit <= 0 or not queues:
            return []
        nonce = request_id if request_id is not None else secrets.token_hex(16)
        with self._db.tx() as db:
            t = db.now(now)
            if request_id is not None:
                seen = db.requests.get(("claim", request_id))
                if seen is not None and seen[1] > t - REQUEST_TTL:
                    got = [db.jobs[i] for i in seen[0] if i in db.running]
                    got = [j for j in got if j.locked_by == owner
                           and j.lease_token == f"{nonce}:{j.id}"]
                    return sorted(got, key=lambda j: (j.priority, j.run_at, j.id))
            candidates = [key for q in dict.fromkeys(queues)
                          for key in db.pending.get(q, {}).values() if key[1] <= t]
            claimed = []
            for _, _, job_id in heapq.nsmallest(limit, candidates):
                job = replace(db.jobs[job_id], status="running", locked_by=owner,
                              lease_until=t + lease_ttl, attempt=db.jobs[job_id].attempt + 1,
                              started_at=t, cancel_requested=False,
                              lease_token=f"{nonce}:{job_id}")
                db.put(job)
                claimed.append(job)
            if request_id is not None and claimed:
                db.requests[("claim", request_id)] = ([j.id for j in claimed], t)
            if claimed:
                db.changed()
            if len(claimed) < limit:
                # The claimer may wait next: remember what it has seen, so a change that
                # lands between this claim and wait_for_jobs still wakes it.
                self._local.seen = db.generation
            return claimed

    def heartbeat(
        self, owner: str, leases: Sequence[Lease], lease_ttl: float, *, now: float | None = None,
    ) -> HeartbeatResult:
        lost: set[Lease] = set()
        cancel: set[Lease] = set()
        with self._db.tx() as db:
            t = db.now(now)
            for lease in leases:
                job = _held(db, lease)
                if job is None:
                    lost.add(lease)
                    continue
                db.put(replace(job, lease_until=t + lease_ttl))
                if job.cancel_requested:
                    cancel.add(lease)
            worker = db.workers.get(owner)
            if worker is not None:
                db.workers[owner] = replace(worker, last_seen=t)
        return HeartbeatResult(lost=frozenset(lost), cancel_requested=frozenset(cancel))

    def finish(self, outcomes: Sequence[Outcome], *, now: float | None = None) -> list[Lease]:
        """Fenced outcome by outcome, in order; the same outcome twice counts once; an
        outcome this lease already applied in an earlier call is not reported rejected."""
        for o in outcomes:  # the whole batch is checked before anything is written
            if o.result is not None:
                check_json_text(o.result, "result")
        if not outcomes:
            return []
        with self._db.tx() as db:
            t = db.now(now)
            applied: dict[tuple[Lease, str], bool] = {}
            applied_jobs: set[int] = set()
            for o in outcomes:
                key = (o.lease, o.kind)
                if key in applied:
                    continue
                job = _held(db, o.lease)
                applied[key] = job is not None
                if job is not None:
                    db.put(apply_outcome(job, o, t))
                    applied_jobs.add(job.id)
            rejected = [
                o.lease for o in outcomes
                if not applied[(o.lease, o.kind)]
                and (o.lease.job_id in applied_jobs or not replayed(db.jobs.get(o.lease.job_id),
                                                                    o))
            ]
            if applied_jobs:
                db.changed()
            return rejected

    def _fenced_set(self, field: str, lease: Lease, value: str) -> bool:
        check_json_text(value, field)
        with self._db.tx() as db:
            job = _held(db, lease)
            if job is None:
                return False
            if field == "checkpoint":
                db.put(replace(job, checkpoint=value))
            else:
                db.put(replace(job, progress=value))
            return True

    def save_checkpoint(self, lease: Lease, checkpoint: str, *, now: float | None = None) -> bool:
        return self._fenced_set("checkpoint", lease, checkpoint)

    def set_progress(self, lease: Lease, progress: str, *, now: float | None = None) -> bool:
        return self._fenced_set("progress", lease, progress)

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
            reaped = []
            for job in expired:
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
        return sorted(reaped, key=lambda r: r.job_id)

    def next_lease_expiry(self) -> float | None:
        with self._db.tx() as db:
            return min((db.jobs[i].lease_until or 0.0 for i in db.running), default=None)

    # -- waiting -----------------------------------------------------------------------------
    def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> bool:
        """Woken by any change to the data (enqueue, release, reap, retry, resume, notify).

        The baseline is the generation this store saw at its last short claim (or last
        wait), so a change that landed in between ends the wait at once."""
        db = self._shared
        if db is None:
            return False
        deadline = clock.monotonic() + max(0.0, timeout)
        with db.lock:
            baseline: int | None = getattr(self._local, "seen", None)
            if baseline is None:
                baseline = db.generation
            try:
                while db.generation == baseline and self._shared is not None:
                    remaining = deadline - clock.monotonic()
                    if remaining <= 0:
                        return False
                    db.lock.wait(remaining)
                return self._shared is not None
            finally:
                self._local.seen = db.generation

    def notify(self, queues: Sequence[str]) -> None:
        db = self._shared
        if db is not None:
            with db.lock:
                db.changed()

    def finished_ids(self, job_ids: Sequence[int]) -> bool:
        """True when one of ``job_ids`` is terminal or gone (call with the lock held)."""
        db = self._db
        return any((job := db.jobs.get(i)) is None or job.status in TERMINAL for i in job_ids)


__all__ = ["MemoryStore", "parse_name"]
