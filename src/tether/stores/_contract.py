"""The store contract: the one seam between tether and a storage engine, split by who uses it.

Invariants every store upholds (the contract suite in ``tests/contract/`` proves them on each):

1. **The claim is the lease grant.** ``claim`` moves due ``pending`` jobs to ``running`` and,
   in the same atomic write, sets ``locked_by`` (the claiming worker incarnation),
   ``lease_until`` (store now + ``lease_ttl``) and ``attempt += 1``. No job is ever ``running``
   without an owner and a lease, and no two claimers ever receive the same (job, attempt).
2. **Every write about a claimed job is fenced** by its :class:`Lease` — (job id, attempt,
   owner, token) — *and* ``status = 'running'``. A write whose lease no longer matches
   changes nothing:
   a stale heartbeat is reported in :attr:`HeartbeatResult.lost`, a stale outcome in the list
   ``finish`` returns, a stale checkpoint/progress write returns ``False``. The attempt number is
   what fences a *self*-zombie: the same worker id re-claiming a job it lost. The ``token``
   is random per claim (128 bits from the claimer, plus the job id), so the fence cannot be
   forged by an id that a store hands out again after it lost its data (a Redis restart
   without persistence): a stale attempt 1 of an old job 1 never matches a new job 1.
3. **The reaper is one set-based write.** ``reap_expired`` moves every ``running`` job whose
   ``lease_until < now - stall_grace`` through the normal retry / dead-letter rule in a single
   statement (or Lua script / transaction). Two reapers at once give the same end state,
   because the first write moves the row out of ``running``.
4. **The store's clock decides.** ``now=None`` means the store's own clock (PostgreSQL ``now()``,
   Redis ``TIME``, SQLite's ``julianday('now')``). Every time-dependent method takes an explicit
   ``now`` (epoch seconds, float) so tests drive time without patching anything.
5. **Flow limits hold by construction.** A claim given ``flow`` limits (:class:`FlowLimit`)
   never takes a job past a limit: the slots of a concurrency limit are the group's
   ``running`` rows (live leases) and nothing else, so no counter can leak when a worker
   dies; rate windows are the store's recorded starts on the store's clock.
6. **Dependencies resolve exactly once, in the write that decides them.** A job enqueued with
   ``after`` (:attr:`NewJob.after`) is ``waiting`` while a parent is not terminal. The write
   that makes its last unresolved parent ``done`` (a ``finish``) makes it ``pending`` (due at
   ``max(run_at, now)``), in the same atomic write; the write that makes a parent ``failed``
   or ``cancelled`` (``finish``, ``reap_expired``, ``cancel``, ``purge``) cancels it instead,
   ``failure_reason`` ``dependency_failed`` and an error record naming the parent, and so its
   own waiting children, transitively, in that same write (with ``allow_failure`` such a
   parent counts as resolved instead). Each (parent, child) link resolves once: a replayed or
   stale finish, a retried dead letter that ends again, or two parents ending at once on
   different workers never release a child twice nor leave it waiting. Only ``waiting`` jobs
   are touched. ``prune`` keeps a parent while a child is not terminal.

Counting rules (shared by ``finish`` and ``reap_expired`` so every path agrees):

* ``attempt`` counts claims and is the fence token; it never goes down.
* ``failures`` counts handler errors and timeouts; ``stall_count`` counts stalls: leases the
  reaper took back, and ``stalled`` outcomes (the holder saw the process running the handler
  die); ``interruptions`` counts leases handed back on shutdown (neither a failure nor a stall).
* An error retries while ``failures + stall_count < max_attempts`` (after the increment),
  otherwise the job is ``failed`` (the dead-letter state) with the given reason.
* A stall (reaped, or a ``stalled`` outcome) retries while ``stall_count < max_stalls`` *and*
  ``failures + stall_count < max_attempts`` (after the increment), otherwise ``failed`` with
  reason ``stalled``.
* A cancel request sticks: an attempt of a job with ``cancel_requested`` that ends by error,
  timeout, stall (``reap_expired`` or a ``stalled`` outcome) or hand-back (``released``) ends
  the job ``cancelled`` instead of retrying it (the request is not lost because the attempt
  happened to end another way). ``done`` still wins: the work was done.
* Every error record appended to ``errors`` has exactly the keys ``attempt``, ``error``,
  ``reason``, ``at`` and ``owner`` (the lease's owner), from every path (finish, reap).
  Error text is stored through :func:`tether._text.clean_error`, so it reads back identically
  on every store.
* ``snoozes`` counts ``snoozed`` outcomes (the handler asked to run later): not a failure,
  not a stall, and not an attempt that counts (``tries``); no budget limits it.
* A reaped, stalled or released job keeps its ``run_at``: it was due when claimed, so it is
  due again at once *and keeps its place in line*. (Setting ``run_at = now`` would send
  recovered jobs to the back of a backlog and break the recovery bound under load.)

Payloads, results, checkpoints and progress cross this seam as JSON *text*: the API layer
encodes once (refusing what JSON cannot carry) and the store never interprets them.

Bad input: every store checks a whole ``enqueue`` batch with :func:`tether._limits.check_jobs`
before writing any of it, and job ids / page sizes with ``check_job_id`` / ``check_page``, so
the same ``ValueError`` (or ``TypeError`` for JSON text) comes from every store and a batch is
all or nothing. A store never lets a driver exception out: ``StoreUnavailable`` when retrying
may help (connection, read-only node, serialization, resources, shutdown), its subclass
``StoreFull`` when the store refuses writes for lack of room until someone frees it (a worker
then stops claiming: a job claimed could be neither renewed nor finished), ``StoreError`` when
it cannot. Every call is safe to retry: a call whose reply was lost and that is sent again has
the effect of one call (stores dedup replays of non-idempotent writes by request id, or do
not replay them).

Roles: each caller names the one Protocol it needs, and a store implements all of them
(:class:`Store`). :class:`Producer` is what applications enqueue, read, cancel and wait
through; :class:`Leases` is a worker's lease path (claim, heartbeat, finish, the fenced writes,
waking); :class:`Maintenance` is the maintainer's (reaping, pruning, leadership, periodic
ticks); :class:`Liveness` is death detection (a worker's liveness token, the check for dead
owners and the reap of their jobs: issue #22); :class:`Admin` is the operator's tools
(listings, search, purge, pause, dead-letter retry), a producer too; :class:`Lifecycle` creates
and checks the schema. Every role has :class:`Basics` (the store's kind, capabilities and
clock, ``info``, ``get_job``, ``close``). A read two roles need (``paused_queues``, ``leader``,
``schedules``) is declared in both, with the same signature (the contract suite checks it).

Optional abilities are declared, never guessed: a store's ``capabilities``
(:class:`~tether.stores._records.Capabilities`) say whether it is :class:`Transactional`, and
:func:`transactional_enqueue` / :func:`transactional_finish` hand out that side only when they
say so. A caller checks once and never catches ``TypeError`` to find out (which used to
report a bad payload as a store that cannot enqueue in a transaction). Likewise
``capabilities.detects_death`` says whether the store can tell a dead process from a slow one
(:class:`Liveness`); without it (or through ``tether://``) the lease alone decides, and
``liveness_why_not`` says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, cast, runtime_checkable

from tether.stores._records import (
    DEPENDENCY_FAILED,
    REAPED_ERROR,
    STATUSES,
    TERMINAL,
    CancelResult,
    Capabilities,
    DeadOwners,
    FailureReason,
    FlowLimit,
    FlowScope,
    HeartbeatResult,
    JobFilter,
    JobLinks,
    JobRecord,
    JobStatus,
    Leadership,
    Lease,
    NewJob,
    Outcome,
    OutcomeKind,
    QueueCount,
    Reaped,
    RetryResult,
    ScheduleState,
    StoreInfo,
    WorkerInfo,
)
from tether.stores._roles import (
    Admin,
    AsyncProducer,
    Basics,
    Leases,
    Lifecycle,
    Liveness,
    Maintenance,
    Producer,
)

__all__ = [
    "DEPENDENCY_FAILED",
    "REAPED_ERROR",
    "ROLES",
    "STATUSES",
    "TERMINAL",
    "Admin",
    "AsyncProducer",
    "Basics",
    "CancelResult",
    "Capabilities",
    "DeadOwners",
    "FailureReason",
    "FlowLimit",
    "FlowScope",
    "HeartbeatResult",
    "JobFilter",
    "JobLinks",
    "JobRecord",
    "JobStatus",
    "Leadership",
    "Lease",
    "Leases",
    "Lifecycle",
    "Liveness",
    "Maintenance",
    "NewJob",
    "Outcome",
    "OutcomeKind",
    "Producer",
    "QueueCount",
    "Reaped",
    "RetryResult",
    "ScheduleState",
    "Store",
    "StoreInfo",
    "Transactional",
    "WorkerInfo",
    "transactional_enqueue",
    "transactional_finish",
]


@runtime_checkable
class Store(Lifecycle, Admin, Producer, Leases, Maintenance, Liveness, Protocol):
    """One storage engine: every role (an Admin is also a Producer). What opens a store
    (``open_store``) hands out."""


#: Every role, in the order of this module: a store implements each (the contract suite).
ROLES: tuple[type, ...] = (Basics, Lifecycle, Producer, Leases, Maintenance, Liveness, Admin)


@runtime_checkable
class Transactional(Protocol):
    """The optional ability to write inside the caller's transaction (the outbox pattern):
    on the connection given as ``conn``, never committing it, so the jobs or the completion
    commit or roll back with the caller's own writes. A store has it when its
    ``capabilities`` say so; reach it through :func:`transactional_enqueue` or
    :func:`transactional_finish`, never by trying the call."""

    def transaction(self) -> AbstractContextManager[Any]:
        """A connection of the store inside a transaction: commit on success, rollback on
        error. Pass it as ``conn=``."""
        ...

    def enqueue(
        self, jobs: Sequence[NewJob], *, now: float | None = None,
        request_id: str | None = None, conn: Any = None,
    ) -> list[int]: ...

    def finish(
        self, outcomes: Sequence[Outcome], *, now: float | None = None, conn: Any = None
    ) -> list[Lease]: ...


def transactional_enqueue(store: Basics) -> Transactional | None:
    """``store``'s transactional side when it declares ``enqueue_in_transaction``, else None."""
    return cast(Transactional, store) if store.capabilities.enqueue_in_transaction else None


def transactional_finish(store: Basics) -> Transactional | None:
    """``store``'s transactional side when it declares ``complete_in_transaction``, else None."""
    return cast(Transactional, store) if store.capabilities.complete_in_transaction else None
