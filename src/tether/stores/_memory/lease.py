"""The lease path of the memory store (the :class:`~tether.stores._contract.Leases` role): claim,
heartbeat, finish, the fenced writes, worker rows, and waking idle workers.

Invariants (the contract's 1 and 2, kept under the shared lock):

* **The claim is the lease grant**: status, owner, lease, ``attempt + 1``, token and
  ``started_at`` are set together in one step, so no two claimers receive the same
  (job, attempt).
* **Every write about a claimed job is fenced** by (id, attempt, owner, token) and
  ``status == "running"`` (:func:`_held`), exactly as the SQL stores' ``WHERE`` clauses.
* **Replays act once**: a ``claim`` with a request id is answered from a record kept 24 h; a
  repeated ``finish`` recognises its applied outcome by the token the row keeps.
"""

from __future__ import annotations

import heapq
import secrets
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from tether import _clock as clock
from tether._limits import check_json_text
from tether.stores._contract import (
    FlowLimit,
    HeartbeatResult,
    JobRecord,
    Lease,
    Outcome,
    WorkerInfo,
)
from tether.stores._flow import (
    Cell,
    FlowBook,
    group_range,
    longest_window,
    ranked,
    rate_groups,
)
from tether.stores._memory.rules import apply_outcome, replayed
from tether.stores._memory.state import REQUEST_TTL, Shared, checked_request_id


def _held(db: Shared, lease: Lease) -> JobRecord | None:
    """The row ``lease`` still holds (the fence), or None."""
    job = db.jobs.get(lease.job_id)
    if (job is None or job.status != "running" or job.attempt != lease.attempt
            or job.locked_by != lease.owner or job.lease_token != lease.token):
        return None
    return job


def _flow_choice(
    db: Shared, flow: Sequence[FlowLimit], candidates: list[tuple[int, float, int]],
    limit: int, t: float,
) -> list[int]:
    """The ids a claim with flow limits takes (the rules of ``Leases.claim``), in order, and
    their starts recorded in the start log. Pure Python under the lock: the memory store
    already looks at every due job of its queues."""
    running: Counter[Cell] = Counter()
    for job_id in db.running:
        job = db.jobs[job_id]
        running[(job.task, job.queue, job.limit_key)] += 1
    started: dict[tuple[int, str], int] = {}
    for i, limit_ in rate_groups(flow):
        for group, log in db.starts.items():
            lo, hi = group_range(limit_)
            if lo <= group < hi:
                started[(i, group)] = sum(1 for at in log if t - limit_.per < at <= t)
    book = FlowBook(flow, running, started)
    jobs = [db.jobs[job_id] for _, _, job_id in candidates]
    rank = ranked((j.priority, j.run_at, j.id, (j.queue, j.task), j.limit_key) for j in jobs)
    jobs.sort(key=lambda j: (j.priority, rank[j.id], j.run_at, j.id))
    chosen: list[int] = []
    for job in jobs:
        if len(chosen) == limit:
            break
        if book.take(job.task, job.queue, job.limit_key):
            chosen.append(job.id)
            for group in book.starts(job.task, job.queue, job.limit_key):
                db.starts.setdefault(group, []).append(t)
    for _, limit_ in rate_groups(flow):
        lo, hi = group_range(limit_)
        horizon = t - longest_window(flow, limit_)
        for group in [g for g in db.starts if lo <= g < hi]:
            kept = [at for at in db.starts[group] if at > horizon]
            if kept:
                db.starts[group] = kept
            else:
                del db.starts[group]
    return chosen


class MemoryLeases:
    """The :class:`~tether.stores._contract.Leases` role of :class:`MemoryStore`."""

    _shared: Shared | None

    @property
    def _db(self) -> Shared:
        raise NotImplementedError  # pragma: no cover - MemoryStore provides it

    _local: threading.local

    def claim(
        self, owner: str, queues: Sequence[str], limit: int, lease_ttl: float, *,
        now: float | None = None, request_id: str | None = None,
        flow: Sequence[FlowLimit] = (),
    ) -> list[JobRecord]:
        """Claim in one step; every claimed row's token is ``nonce:id``. The nonce is the
        ``request_id`` when given (a repeat returns the jobs still running under it and
        claims nothing more), else 128 fresh random bits."""
        request_id = checked_request_id(request_id)
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
            chosen = (_flow_choice(db, flow, candidates, limit, t) if flow
                      else [job_id for _, _, job_id in heapq.nsmallest(limit, candidates)])
            claimed = []
            for job_id in chosen:
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
            db.signals.pop(worker_id, None)

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

    def wait_for_signal(self, owner: str, timeout: float) -> bool:
        """Woken by a cancel of a job ``owner`` holds or a pause (``Shared.signal``)."""
        db = self._shared
        if db is None:
            return False
        deadline = clock.monotonic() + max(0.0, timeout)
        with db.lock:
            if owner not in db.signals:
                db.signals[owner] = False
                return True  # watched from now on: what came before is the heartbeat's
            while not db.signals.get(owner, True) and self._shared is not None:
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    return False
                db.lock.wait(remaining)
            if owner in db.signals:
                db.signals[owner] = False
            return True

    def notify(self, queues: Sequence[str]) -> None:
        db = self._shared
        if db is not None:
            with db.lock:
                db.changed()


__all__ = ["MemoryLeases"]
