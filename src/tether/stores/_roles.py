"""The store contract split by who uses it: one Protocol per role, each a caller's view.

Invariant: a store implements every role (:class:`tether.stores._contract.Store` is their
union), so a role only narrows what its caller may call, never what a store must do. A read two
roles need (``paused_queues``, ``leader``, ``schedules``) is declared in both with the same
signature and implemented once; the contract suite checks both. The rules every method keeps
(the claim is the lease grant, fences, the reaper, the store's clock, the counting rules,
input checks, replay safety) are stated once, in :mod:`tether.stores._contract`.

This split is what a caller depends on (the worker's heartbeater needs :class:`Leases`, the
reaper :class:`Maintenance`, the CLI :class:`Admin`), and what a remote-worker server can
authorize by.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from tether.stores._records import (
    CancelResult,
    Capabilities,
    DeadOwners,
    FlowLimit,
    HeartbeatResult,
    JobFilter,
    JobLinks,
    JobRecord,
    JobStatus,
    Leadership,
    Lease,
    NewJob,
    Outcome,
    QueueCount,
    Reaped,
    RetryResult,
    ScheduleState,
    StoreInfo,
    WorkerInfo,
)

__all__ = [
    "Admin", "AsyncProducer", "Basics", "Leases", "Lifecycle", "Liveness", "Maintenance",
    "Producer",
]


@runtime_checkable
class Basics(Protocol):
    """What every role has. Implementations are thread-safe: any method from any thread.

    Errors: :class:`tether._errors.StoreUnavailable` for transient connection trouble (the
    caller may retry; :class:`tether._errors.StoreFull` when it refuses writes for lack of
    room, on which a worker stops claiming), :class:`tether._errors.JobNotFound` for unknown
    ids where stated, :class:`tether._errors.SchemaError` for a missing or too-new schema.
    """

    kind: str
    capabilities: Capabilities

    def now(self) -> float:
        """The store's clock, epoch seconds."""
        ...

    def info(self) -> StoreInfo: ...

    def get_job(self, job_id: int) -> JobRecord | None: ...

    def get_jobs(self, job_ids: Sequence[int]) -> list[JobRecord]:
        """The jobs with these ids in one round trip, in the order asked (unknown ids left
        out; an id asked twice is returned once). At most MAX_PAGE ids (ValueError beyond).
        What a chord's callback reads its parents' results with."""
        ...

    def job_links(self, job_id: int) -> JobLinks:
        """A job's parents and children (issue #20; see :class:`JobLinks`). Raises
        JobNotFound for an unknown id."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Lifecycle(Basics, Protocol):
    """Who opens a store: creates, upgrades or checks its schema."""

    def migrate(self) -> int:
        """Create or upgrade the schema; safe when several processes call it at once.

        Returns the schema version now in place.
        """
        ...

    def check_schema(self) -> None:
        """Raise SchemaError when the schema is missing or newer than this code knows."""
        ...


@runtime_checkable
class Producer(Basics, Protocol):
    """An application's side: enqueue jobs, cancel them, wait for them to finish."""

    def enqueue(
        self, jobs: Sequence[NewJob], *, now: float | None = None,
        request_id: str | None = None,
    ) -> list[int]:
        """Insert jobs in one round trip; ids in input order (existing id on unique_key hit).

        With ``request_id``, a repeat of the call (its reply was lost) within 24 h inserts
        nothing and returns the same ids.

        ``NewJob.after`` (invariant 6): every listed id must name an existing job, else
        JobNotFound and nothing of the batch is written (ids of the same batch do not count:
        a parent is enqueued before its children). A job whose parents are all ``done``
        (or terminal, with ``allow_failure``) is inserted ``pending``; one with a parent
        ``failed`` or ``cancelled`` (without ``allow_failure``) is inserted ``cancelled``,
        reason ``dependency_failed``; otherwise ``waiting``, never claimed until released."""
        ...

    def cancel(self, job_id: int, *, now: float | None = None) -> CancelResult:
        """pending or waiting → cancelled at once ("cancelled"; its waiting descendants are
        cancelled with it, invariant 6); running → cancel_requested set ("requested", the
        holder learns it at its next heartbeat, which the same write brings forward by
        signalling the holder: see ``Leases.wait_for_signal``); terminal → "finished".
        Raises JobNotFound for an unknown id."""
        ...

    def wait_for_finish(self, job_ids: Sequence[int], timeout: float) -> bool:
        """Block up to ``timeout`` seconds until one of ``job_ids`` may have become terminal.
        True when woken early. PostgreSQL and Redis are woken by a notification from
        ``finish``/``cancel``/``reap_expired``; SQLite by a short poll. Spurious wake-ups are
        allowed; callers re-read the job."""
        ...

    def async_producer(self) -> AsyncProducer:
        """The store's producer side for ``asyncio`` callers: native async drivers where they
        exist (psycopg's async connection, ``redis.asyncio``), a worker thread otherwise.
        Made on first call and kept; closed by ``close``."""
        ...


@runtime_checkable
class Leases(Basics, Protocol):
    """A worker's lease path: invariants 1 and 2 (the claim is the lease grant, every write
    about a claimed job is fenced) and the counting rules of ``finish``."""

    def claim(
        self,
        owner: str,
        queues: Sequence[str],
        limit: int,
        lease_ttl: float,
        *,
        now: float | None = None,
        request_id: str | None = None,
        flow: Sequence[FlowLimit] = (),
    ) -> list[JobRecord]:
        """Claim up to ``limit`` due pending jobs of ``queues`` in one atomic write.

        ``request_id`` (32 hex characters, drawn by the store when None) is the nonce of the
        claimed jobs' lease tokens: a repeat of the call with the same id returns the jobs
        still running under it and claims nothing more, so a lost reply orphans nothing.
        A repeat of a claim that granted nothing may claim afresh (nothing was orphaned, so
        a store need not record empty claims).

        Order: priority, then run_at, then id. Claimed rows get status running,
        ``locked_by = owner``, ``lease_until = now + lease_ttl``, ``attempt += 1``,
        ``started_at = now``, ``cancel_requested = false``. Returned jobs show the new values.

        ``flow``: the fleet-wide limits the claimer declares (issue #19). Empty: none, and the
        claim is exactly the above (same statement, same cost). Otherwise a due pending job
        ``j`` is *eligible* only while, for every limit ``L`` in ``flow`` that applies to it
        (``L.applies(j.task, j.queue)``), with ``g = L.group(j.limit_key)``:

        * ``running(g) + taken(g) < L.concurrency`` (when set): ``running(g)`` counts the jobs
          of the group with status ``running``, every one, its lease expired or not (a slot
          *is* a live lease: only leaving ``running`` frees it, by finish, cancel or the
          reaper, so a dead worker's slot comes back exactly at the reap, and a zombie's
          late, fenced-out write frees nothing); ``taken(g)``: jobs this claim already took.
        * ``started(g) + taken(g) < L.rate`` (when set): ``started(g)`` counts the starts the
          store recorded for ``g`` in ``(now - L.per, now]``. Every claim of a job records
          one start (at the claim's ``now``) in each group of a rate limit that applies to it,
          so a retry counts again; records older than the longest window may be dropped.

        An ineligible job is skipped, never waited on: the claim takes the eligible jobs
        behind it (no head-of-line blocking; a store that bounds how far it looks documents
        the bound, at least 5,000 due jobs per queue). Eligible jobs are taken in order
        (priority, rank, run_at, id), where rank is 1 for a job without a ``limit_key`` and,
        for one with a key, its 1-based position among the due pending jobs of its (queue,
        task, limit_key) in (priority, run_at, id) order: every key's first job before any
        key's second (keys rotate within a queue), so a key with a backlog of thousands never
        starves a key with a few.
        Two limited claims never both take a group's last slot (they are serialized where
        the store needs it: one lock, held for the claim's write only).
        """
        ...

    def heartbeat(
        self,
        owner: str,
        leases: Sequence[Lease],
        lease_ttl: float,
        *,
        now: float | None = None,
    ) -> HeartbeatResult:
        """Renew every matching lease to ``now + lease_ttl`` in one statement (round trip).

        Also records that worker ``owner`` was seen at ``now`` (its workers row), in the same
        round trip. An empty ``leases`` only touches the worker row.
        """
        ...

    def finish(self, outcomes: Sequence[Outcome], *, now: float | None = None) -> list[Lease]:
        """Apply outcomes in one round trip, each fenced; return the leases that were rejected.

        A job an outcome makes terminal resolves its waiting children in the same atomic
        write (invariant 6): released to ``pending`` when it was their last parent, or
        cancelled (``dependency_failed``) with their waiting descendants."""
        ...

    def save_checkpoint(self, lease: Lease, checkpoint: str, *, now: float | None = None) -> bool:
        """Fenced; the next attempt of the job reads it. False when the lease is stale."""
        ...

    def set_progress(self, lease: Lease, progress: str, *, now: float | None = None) -> bool:
        """Fenced like save_checkpoint."""
        ...

    def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> bool:
        """Block up to ``timeout`` seconds until a job may be due in ``queues`` (enqueue,
        release, reap). True when woken early. Spurious wake-ups are allowed; a missed
        notification only costs latency because callers poll on timeout."""
        ...

    def notify(self, queues: Sequence[str]) -> None:
        """Wake waiters of ``queues`` (used after reaping or handing leases back)."""
        ...

    def wait_for_signal(self, owner: str, timeout: float) -> bool:
        """Block up to ``timeout`` seconds until something may concern worker ``owner``: a
        cancel requested for a job it holds, or a queue paused. True when signalled.

        A long poll (issue #22): the worker answers a signal with an early heartbeat, which
        alone says what changed (``cancel_requested``) and stays fenced; this only shortens
        the wait for it from up to ``heartbeat_every`` to the store's delivery time. So
        spurious wake-ups are allowed, and a missed signal costs latency, never correctness.
        The first call for an ``owner`` returns True as soon as the store listens for it
        (what came before was not watched: one heartbeat covers it). Never raises for
        connection trouble: a wait cut short by it returns True (the heartbeat then says
        what the store says)."""
        ...

    def paused_queues(self) -> list[str]:
        """The paused queues, sorted (a worker claims from the others)."""
        ...

    def register_worker(self, worker: WorkerInfo, *, now: float | None = None) -> None:
        """Insert a worker row (started_at = last_seen = now), or refresh one: registering
        an id again keeps its ``started_at`` and updates everything else."""
        ...

    def unregister_worker(self, worker_id: str) -> None: ...


@runtime_checkable
class Maintenance(Basics, Protocol):
    """The maintainer's side: invariant 3 (the reaper is one set-based write), pruning,
    leader leases and periodic ticks."""

    def reap_expired(
        self, stall_grace: float = 0.0, *, now: float | None = None, limit: int = 1000
    ) -> list[Reaped]:
        """Take back at most ``limit`` running jobs whose ``lease_until < now - stall_grace``
        in one set-based write, by the stall rule of :mod:`tether.stores._contract`. The error
        text is :data:`~tether.stores._records.REAPED_ERROR`, ``failure_reason`` (when failed)
        is ``stalled``. A job it fails cancels its waiting descendants in the same write
        (invariant 6)."""
        ...

    def next_lease_expiry(self) -> float | None:
        """Earliest ``lease_until`` among running jobs, or None; lets the reaper sleep exactly."""
        ...

    def housekeeping(self) -> str | None:
        """Keep the hot paths fast while history churns; cheap when nothing is due.

        PostgreSQL: VACUUM the jobs table once its dead row versions pass a threshold. Every
        claim leaves a dead entry at the *front* of the claim index, which only VACUUM
        removes, and autovacuum visits at most once a minute: without this, a drain of a
        million jobs slows each claim down linearly. SQLite and Redis remove index entries at
        once and do nothing here. Returns what was done, or None.
        """
        ...

    def prune(
        self, status: JobStatus, older_than: float, *, now: float | None = None, limit: int = 1000
    ) -> int:
        """Delete at most ``limit`` jobs in terminal ``status`` finished before
        ``now - older_than``, except a job with a child that is not terminal yet (the child
        will read its result: invariant 6). Returns how many went."""
        ...

    def delete_dead_workers(self, older_than: float, *, now: float | None = None) -> int:
        """Delete worker rows last seen before ``now - older_than`` (workers that died
        without unregistering). Returns how many went."""
        ...

    def leader_acquire(
        self, name: str, holder: str, ttl: float, *, now: float | None = None
    ) -> Leadership | None:
        """Take leadership of ``name`` when nobody holds it or the holder's lease expired:
        insert-if-absent-or-expired, ``term += 1``. Returns None when someone else holds it.
        (A holder that still holds it is not a new acquisition: it must ``leader_renew``.)"""
        ...

    def leader_renew(
        self, name: str, holder: str, term: int, ttl: float, *, now: float | None = None
    ) -> Leadership | None:
        """Extend the lease to now + ttl iff (holder, term) still hold it and it has not
        expired. None when leadership is lost."""
        ...

    def leader_release(self, name: str, holder: str, term: int) -> bool:
        """Give up leadership iff (holder, term) still hold it. True when released."""
        ...

    def leader_get(self, name: str) -> Leadership | None:
        """The current holder of ``name`` (a plain read), expired or not; None when nobody
        holds it (never acquired, or released). Lets maintainers that do not lead compare
        their settings with the leader's (the holder string carries them)."""
        ...

    def leader(self, name: str, *, now: float | None = None) -> Leadership | None:
        """Who holds leadership of ``name`` now (None when nobody or the lease ran out)."""
        ...

    def schedule_tick(
        self, name: str, tick: float, job: NewJob | None, *, now: float | None = None,
        spec: str | None = None,
    ) -> int | None:
        """Record ``tick`` of periodic schedule ``name`` and enqueue ``job`` for it, in one
        atomic write, iff no tick ``>= tick`` is recorded for ``name`` yet. Returns the new
        job's id, or None when the tick (or a later one) was already recorded: a leader that
        was paused mid-tick, or a replay of a call whose reply was lost, enqueues nothing.
        ``job=None`` records the tick without a job (a skipped tick, or where a new schedule
        starts). The job goes through ``enqueue``'s rules (unique_key, validation). ``spec``
        (the schedule's fingerprint) is recorded with a tick that is taken (None keeps the
        recorded one) and read back in :class:`ScheduleState`."""
        ...

    def schedules(self) -> list[ScheduleState]:
        """Every schedule the store has a tick for, sorted by name."""
        ...


@runtime_checkable
class Liveness(Basics, Protocol):
    """Death detection (issue #22): a worker process holds a *liveness token* that the
    operating system or the store's server releases when the process dies, and not before, so
    the maintenance leader can take a dead process's jobs back at once instead of waiting for
    their leases (which must stay long enough to ride out a pause, a GC stall or a partition).

    Rules every store keeps:

    * **A token is released only by death or by** :meth:`release_liveness`: a paused
      (SIGSTOPped) or hung process keeps it, so its jobs stay leased until the lease says
      otherwise. What releases it is the store's own evidence (a connection the server sees
      close, a file lock the kernel drops), never a timeout.
    * **No token, never dead.** A worker that never took one (an older release, a worker
      behind the remote-worker server, a store or URL that cannot hold one) is never named by
      :meth:`dead_owners` or :meth:`dead_workers`: the lease alone decides for it.
    * **The "no liveness" answer.** A store that cannot detect death declares
      ``capabilities.detects_death = False`` with ``liveness_why_not``; then
      :meth:`take_liveness` returns False and takes nothing, :meth:`dead_owners` finds
      nothing, :meth:`dead_workers` names nobody and :meth:`reap_dead` reaps nothing. A store
      that declares the ability may still answer False for one URL (PostgreSQL through a
      transaction pooler without a ``direct=`` session connection: the capabilities of that
      store object say so).
    * **The reap of a dead owner is the stall path**: :meth:`reap_dead` is
      :meth:`Maintenance.reap_expired` with the jobs selected by owner instead of by expiry:
      the same stall rule, error record (:data:`~tether.stores._records.REAPED_ERROR`, reason
      ``stalled``), wake-ups, ``P:done``/NOTIFY announcements, fences and invariant 6, in one
      set-based write; only jobs still ``running`` under that owner are touched, so a job the
      owner finished, or that someone else re-claimed, is left alone.
    """

    def take_liveness(self, worker_id: str) -> bool:
        """Take this process's liveness token for ``worker_id`` (fresh per process start), held
        until :meth:`release_liveness` or the process dies. True when taken (again: a repeat
        is a no-op); False when this store cannot detect death (the "no liveness" answer:
        ``capabilities.liveness_why_not`` says why). Take it before the first claim."""
        ...

    def release_liveness(self, worker_id: str) -> None:
        """Give the token up as the process's death would: from now on ``worker_id`` counts as
        dead, and any job it still holds is reaped at the next check. A worker calls it last,
        after it handed its jobs back. A no-op for a token this process does not hold."""
        ...

    def dead_owners(self, elections: Sequence[str] = ()) -> DeadOwners:
        """One cheap check (one query, one command, or a lock probe per token): the workers
        whose token is released that may hold running jobs, and the current leases of
        ``elections`` whose holder's token is released (see :class:`DeadOwners`)."""
        ...

    def dead_workers(self, worker_ids: Sequence[str]) -> frozenset[str]:
        """Which of ``worker_ids`` are provably dead (took a token that is now released):
        what ``tether stats`` and the dashboard show."""
        ...

    def reap_dead(
        self, owners: Sequence[str], *, now: float | None = None, limit: int = 1000
    ) -> list[Reaped]:
        """Take back at most ``limit`` running jobs whose ``locked_by`` is one of ``owners``
        (which the caller found dead with :meth:`dead_owners`), by the stall rule, exactly as
        :meth:`Maintenance.reap_expired` does for expired leases. An owner all of whose jobs
        this call took back may be left out of later :meth:`dead_owners` answers."""
        ...


@runtime_checkable
class Admin(Producer, Protocol):
    """The operator's tools (CLI, dashboard, metrics): a producer that also lists, searches,
    purges, pauses and retries. Nothing here is on the lease hot path."""

    def list_jobs(
        self,
        *,
        status: JobStatus | None = None,
        queue: str | None = None,
        after_id: int | None = None,
        limit: int = 100,
    ) -> list[JobRecord]:
        """Jobs in ascending id order with id > after_id (keyset pagination).

        ``limit`` must be 1..MAX_PAGE (ValueError otherwise, on every store)."""
        ...

    def search_jobs(
        self, filter: JobFilter, *, cursor: int | None = None, limit: int = 100
    ) -> list[JobRecord]:
        """Jobs matching ``filter`` in id order (descending when ``newest_first``), keyset
        paginated: only ids below ``cursor`` (descending) or above it (ascending).
        ``limit`` must be 1..MAX_PAGE (ValueError otherwise)."""
        ...

    def counts(self) -> list[QueueCount]:
        """Number of jobs per (queue, status); zero counts may be omitted."""
        ...

    def list_workers(self) -> list[WorkerInfo]: ...

    def retry_failed(
        self, job_ids: Sequence[int] | None, *, now: float | None = None
    ) -> RetryResult:
        """Dead-letter retry: ``failed`` → ``pending`` due now, with ``failures``,
        ``stall_count``, ``failure_reason`` and ``cancel_requested`` reset (``attempt`` stays:
        it is the fence). ``None`` retries every failed job. A job whose ``unique_key`` is
        held by a live job stays failed and is listed in ``conflicts``."""
        ...

    def purge(self, queue: str, statuses: Sequence[JobStatus]) -> int:
        """Delete every job of ``queue`` in ``statuses`` (waiting, pending and terminal states
        only: ValueError for ``running``, whose holder's lease stands). Frees their unique
        keys. A waiting child of a deleted job that was not done is cancelled
        (``dependency_failed``, with its waiting descendants): its parent can never be done.
        Returns how many went."""
        ...

    def pause_queue(self, queue: str) -> bool:
        """Mark ``queue`` paused (workers stop claiming from it; running jobs go on).
        True when it was not paused before. Signals every worker (``wait_for_signal``), so
        they re-read the paused set at once rather than at their next periodic read."""
        ...

    def resume_queue(self, queue: str) -> bool:
        """Un-pause ``queue``; True when it was paused. Wakes the queue's workers."""
        ...

    def paused_queues(self) -> list[str]:
        """As :meth:`Leases.paused_queues`."""
        ...

    def leader(self, name: str, *, now: float | None = None) -> Leadership | None:
        """As :meth:`Maintenance.leader`."""
        ...

    def schedules(self) -> list[ScheduleState]:
        """As :meth:`Maintenance.schedules`."""
        ...


@runtime_checkable
class AsyncProducer(Protocol):
    """The producer half of a store for event loops: never blocks the caller's loop.

    Same semantics, limits and errors as the :class:`Producer` methods of the same names.
    ``conn``: the caller's async connection, for a store whose capabilities declare
    ``enqueue_in_transaction`` (any other raises TypeError).
    """

    async def enqueue(
        self, jobs: Sequence[NewJob], *, request_id: str | None = None, conn: Any = None
    ) -> list[int]: ...

    async def get_job(self, job_id: int) -> JobRecord | None: ...

    async def cancel(self, job_id: int) -> CancelResult: ...

    async def wait_for_finish(self, job_ids: Sequence[int], timeout: float) -> bool: ...

    async def aclose(self) -> None: ...
