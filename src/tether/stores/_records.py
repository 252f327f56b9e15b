"""The records that cross the store seam: frozen dataclasses in and out, and the literal types.

They are values, not behaviour: every rule about how a store changes them is stated once, in
:mod:`tether.stores._contract` (the contract), and proved by ``tests/contract/``. Payloads, results,
checkpoints and progress are JSON *text* here; only the decoded views on :class:`Job` parse it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

JobStatus = Literal["waiting", "pending", "running", "done", "failed", "cancelled"]
FailureReason = Literal[
    "error", "stalled", "timeout", "unknown_task", "bad_arguments", "bad_result",
    "dependency_failed",
]
OutcomeKind = Literal["done", "error", "dead", "cancelled", "released", "stalled", "snoozed"]
FlowScope = Literal["task", "queue"]
CancelResult = Literal["cancelled", "requested", "finished"]

STATUSES: tuple[JobStatus, ...] = ("waiting", "pending", "running", "done", "failed", "cancelled")
TERMINAL: frozenset[str] = frozenset({"done", "failed", "cancelled"})
REAPED_ERROR = "worker lease expired"
#: ``failure_reason`` of a job cancelled because a job it waited on ended failed or cancelled.
DEPENDENCY_FAILED: FailureReason = "dependency_failed"


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job to enqueue. ``payload`` is JSON text of ``[args, kwargs]``.

    Due time: ``run_at`` (epoch seconds) when given, else store now + ``delay``.
    ``priority``: smaller runs first (0 is the default, negative is more urgent).
    ``unique_key``: while a non-terminal job with the same key exists, enqueue returns that
    job's id instead of inserting (also within one batch: the first occurrence wins).
    """

    task: str
    payload: str = "[[], {}]"
    queue: str = "default"
    priority: int = 0
    run_at: float | None = None
    delay: float = 0.0
    max_attempts: int = 5
    max_stalls: int = 3
    unique_key: str | None = None
    #: The value the task's fleet-wide limits are partitioned by (issue #19), stored with the
    #: job: the handler argument named by ``limit_key=`` as text, or the value given to
    #: ``enqueue_with(limit_key=...)``. None: the job has no key.
    limit_key: str | None = None
    #: Ids of the jobs this one waits for (issue #20), each an existing job. The job is
    #: ``waiting`` until every one is ``done`` (see invariant 6 of the contract). Duplicates
    #: count once; the order is kept (it is the order of ``parent_results``).
    after: tuple[int, ...] = ()
    #: With ``after``: a parent that ends ``failed`` or ``cancelled`` counts as resolved
    #: instead of cancelling this job (it runs anyway, and reads that parent's outcome).
    allow_failure: bool = False


@dataclass(frozen=True, slots=True)
class Lease:
    """The fence token of one claim. Every write about a running job carries one.

    ``(job_id, attempt)`` with the job's ``uid`` is the user's dedup key; ``token`` is unique
    per claim across store incarnations (see invariant 2), so an id reused after data loss
    cannot match.
    """

    job_id: int
    attempt: int
    owner: str
    token: str = ""


_new = object.__new__


def _twin(cls: type) -> type:
    """A plain class with ``cls``'s slots and nothing else: what :func:`slot_builder` fills.

    Why: a frozen slots dataclass can only be filled one field at a time through a C call (its
    ``__init__`` calls ``object.__setattr__`` per field; ``job_of`` used to call each slot's
    ``__set__``), about 700 machine instructions a field, 23k a JobRecord. The twin's slots
    are set by plain attribute stores (``o.x = v``: the interpreter's specialised slot store),
    and then the object *becomes* a ``cls``: ``__class__`` may be assigned between two classes
    of the same layout (the same ``__slots__``, no other base), so the result is a ``cls`` in
    every respect (type, ``==``, ``hash``, pickling, ``replace``).
    """
    slots = cls.__dict__["__slots__"]
    return type(f"_{cls.__name__}Twin", (), {"__slots__": slots, "__module__": __name__})


def slot_builder(cls: type, name: str, params: str, values: dict[str, str],
                 scope: dict[str, Any] | None = None, prelude: str = "") -> Callable[..., Any]:
    """Generate ``def name(params)`` returning a ``cls`` whose field ``f`` is the Python
    expression ``values[f]`` (of ``params`` and ``scope``), without ``cls.__init__`` (see
    :func:`_twin`); every field of ``cls`` must be given. ``prelude``: lines (indented) run
    first, e.g. a check of the arguments. The text is built from the field
    names and the caller's own expressions only (as dataclasses generates ``__init__``)."""
    names = [f.name for f in fields(cls)]
    if sorted(names) != sorted(values):
        raise AssertionError(f"{name}: the values do not cover {cls.__name__}: {names}")
    body = [f"    o.{field_name} = {values[field_name]}" for field_name in names]
    source = (f"def {name}({params}):\n{prelude}    o = _new(_Twin)\n" + "\n".join(body)
              + "\n    o.__class__ = _Cls\n    return o\n")
    env: dict[str, Any] = {**(scope or {}), "_new": _new, "_Twin": _twin(cls), "_Cls": cls}
    exec(source, env)  # our own text (see above)
    built: Callable[..., Any] = env[name]
    built.__module__ = __name__
    return built


#: ``Lease(job_id, attempt, owner, token)`` built the cheap way (:func:`slot_builder`): the
#: worker reads one per claimed job.
_lease = slot_builder(Lease, "lease_of", "job_id, attempt, owner, token",
                      {"job_id": "job_id", "attempt": "attempt", "owner": "owner",
                       "token": "token"})


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A snapshot of one job row. Times are epoch seconds (float) or None."""

    id: int
    task: str
    queue: str
    payload: str
    status: JobStatus
    priority: int
    run_at: float
    attempt: int
    max_attempts: int
    failures: int
    stall_count: int
    max_stalls: int
    interruptions: int
    locked_by: str | None
    lease_until: float | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    last_error: str | None
    failure_reason: str | None
    result: str | None
    checkpoint: str | None
    progress: str | None
    unique_key: str | None
    cancel_requested: bool
    #: JSON text of a list of ``{"attempt", "error", "reason", "at", "owner"}`` records,
    #: oldest first.
    errors: str = "[]"
    #: The claim's random token (None unless running); part of :attr:`lease`.
    lease_token: str | None = None
    #: 128 random bits as 32 lowercase hex digits, drawn when the job is enqueued and never
    #: reused, unlike ``id``: a counter that hands ids out again after the store lost rows (a
    #: failover to an asynchronous standby, a Redis restart without persistence). Part of the
    #: dedup key, so that it never names two jobs.
    uid: str = ""
    #: See :attr:`NewJob.limit_key`.
    limit_key: str | None = None
    #: Times a handler put this job back for later (``snoozed`` outcomes): neither failures
    #: nor attempts that count (see :attr:`tries`).
    snoozes: int = 0

    # Decoded views for users of ``App.get_job``; the fields stay JSON text across the seam.
    @property
    def args(self) -> list[Any]:
        value: list[Any] = json.loads(self.payload)[0]
        return value

    @property
    def kwargs(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.payload)[1]
        return value

    @property
    def tries(self) -> int:
        """Attempts that count: claims (``attempt``, the fence) less the hand-backs
        (``interruptions``: released unrun by a process-pool child, or handed back on
        shutdown) and the snoozes. What ``tether jobs`` shows as the attempt."""
        return max(0, self.attempt - self.interruptions - self.snoozes)

    @property
    def result_value(self) -> Any:
        """The handler's return value (None until done)."""
        return None if self.result is None else json.loads(self.result)

    @property
    def error_history(self) -> list[dict[str, Any]]:
        """One record per failed, stalled or interrupted attempt, oldest first."""
        value: list[dict[str, Any]] = json.loads(self.errors)
        return value

    @property
    def lease(self) -> Lease:
        """The fence token of the current claim; only meaningful while ``running``."""
        owner = self.locked_by
        if owner is None:
            raise ValueError(f"job {self.id} is {self.status}, it holds no lease")
        # Lease(...) without the frozen __init__ (an object.__setattr__ call per field): the
        # worker reads one per claimed job.
        lease: Lease = _lease(self.id, self.attempt, owner, self.lease_token or "")
        return lease


#: JobRecord's fields, in order.
JOB_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(JobRecord))
#: ``JobRecord(*values)`` for a full row (every field, in order), built without the frozen
#: dataclass ``__init__`` (:func:`slot_builder`): a claim builds one per job on the worker's
#: hot path. Same object, equal to ``JobRecord(*values)``; a row of the wrong length is
#: refused as ``JobRecord(*values)`` would.
job_of: Callable[[Sequence[Any]], JobRecord] = slot_builder(
    JobRecord, "job_of", "values",
    {name: f"values[{i}]" for i, name in enumerate(JOB_FIELDS)},
    {"JobRecord": JobRecord},
    prelude=(f"    if len(values) != {len(JOB_FIELDS)}:\n"
             "        return JobRecord(*values)  # raises the usual TypeError\n"))


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended, reported by its holder.

    * ``done``: result (JSON text) stored, job ``done``.
    * ``error``: ``failures += 1``; back to ``pending`` at store now + ``retry_delay`` while the
      attempt budget lasts, else ``failed`` with ``reason`` (``error`` or ``timeout``).
    * ``dead``: ``failures += 1`` and ``failed`` at once with ``reason`` (no retry).
    * ``cancelled``: job ``cancelled``.
    * ``released``: lease handed back (shutdown, or a task this worker does not know):
      ``pending``, ``interruptions += 1``, neither a failure nor a stall. ``run_at`` is kept
      (due at once, first in line) when ``retry_delay`` is 0, else store now + retry_delay.
    * ``stalled``: the process running the handler died mid-attempt (a process-pool child that
      crashed), reported by its holder at once instead of waiting for the lease to expire.
      Exactly the reaper's stall rule: ``stall_count += 1``; ``pending`` with ``run_at``
      unchanged while ``stall_count < max_stalls`` and ``failures + stall_count <
      max_attempts`` (after the increment), else ``failed`` with ``reason`` (default
      ``stalled``). ``failures`` is unchanged. A cancel request sticks (``cancelled``).
    * ``snoozed``: the handler put the job back for later (``tether.Snooze``): ``pending`` at
      store now + ``retry_delay``, ``snoozes += 1``; ``failures``, ``stall_count`` and
      ``interruptions`` unchanged (a snooze is not a failure and does not use an attempt:
      see :attr:`JobRecord.tries`). Its record in ``errors`` has reason ``snoozed`` and the
      given ``error`` text (``"snoozed"`` when None); ``last_error`` is left as it was. A
      cancel request sticks.

    A batch is fenced outcome by outcome: a stale outcome next to the valid one for the same
    job is rejected and the valid one applied. The same outcome twice in one batch counts
    once and is reported like the first.

    Every kind but ``snoozed`` records ``error`` (when given) in ``last_error``; every kind
    appends it to ``errors``, clears ``locked_by``/``lease_until`` and sets ``finished_at``
    when the job became terminal.
    """

    lease: Lease
    kind: OutcomeKind
    result: str | None = None
    error: str | None = None
    reason: FailureReason | None = None
    retry_delay: float = 0.0



_SET_OUTCOME = tuple(getattr(Outcome, f.name).__set__ for f in fields(Outcome))


def done_outcome(lease: Lease, result: str = "null") -> Outcome:
    """``Outcome(lease, "done", result=result)``, built without the frozen dataclass
    ``__init__`` (six ``object.__setattr__`` calls): every job that succeeds builds one on
    the worker's hot path. Same object, equal to the one ``__init__`` builds."""
    outcome: Outcome = _new(Outcome)
    set_lease, set_kind, set_result, set_error, set_reason, set_delay = _SET_OUTCOME
    set_lease(outcome, lease)
    set_kind(outcome, "done")
    set_result(outcome, result)
    set_error(outcome, None)
    set_reason(outcome, None)
    set_delay(outcome, 0.0)
    return outcome

@dataclass(frozen=True, slots=True)
class FlowLimit:
    """One fleet-wide limit a claimer asks the store to enforce (issue #19).

    ``scope`` ``"task"``: the jobs whose task is ``name``; ``"queue"``: the jobs of queue
    ``name``. ``concurrency``: at most this many of them ``running`` at once; ``rate`` with
    ``per`` (seconds): at most ``rate`` starts (claims) in any window of ``per`` seconds.
    ``per_key``: both hold per value of the job's ``limit_key`` instead of for the scope as a
    whole (task scope only). How ``claim`` enforces them is in :meth:`Leases.claim`.

    Why limits are an argument of the claim, not rows in the store: they are declared in the
    application's code (``@app.task(concurrency=...)``, ``app.queue(...)``), which every
    worker of a fleet runs; the store holds only what must be shared (running jobs and the
    starts of rate-limited groups), so a limit needs no counter that a dead worker can leak.
    """

    scope: FlowScope
    name: str
    concurrency: int | None = None
    rate: int | None = None
    per: float = 0.0
    per_key: bool = False

    def group(self, limit_key: str | None) -> str:
        """The name of the group a job with ``limit_key`` counts in under this limit: the
        key of the store's start log for rate limits (``\\x1f`` cannot appear in names)."""
        base = f"{self.scope}\x1f{self.name}"
        if not self.per_key:
            return base
        return f"{base}\x1f" if limit_key is None else f"{base}\x1f={limit_key}"

    def applies(self, task: str, queue: str) -> bool:
        return self.name == (task if self.scope == "task" else queue)


@dataclass(frozen=True, slots=True)
class JobLinks:
    """A job's place in a workflow (issue #20): what :meth:`Basics.job_links` reads.

    ``parents``: the ids given as ``after`` at enqueue, in that order (a parent pruned since
    is still listed). ``children``: the jobs enqueued with this one in their ``after``, in
    ascending id order (those pruned since are not listed). ``waiting_on``: how many parents
    have not resolved yet (0 unless ``waiting``). ``allow_failure``: as given at enqueue.
    """

    job_id: int
    parents: tuple[int, ...] = ()
    children: tuple[int, ...] = ()
    waiting_on: int = 0
    allow_failure: bool = False


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """What one batched heartbeat learned.

    ``lost``: leases that matched no running row (reaped, re-claimed, finished or cancelled by
    someone else); their holder must stop the handler. ``cancel_requested``: leases still held
    whose job was asked to cancel (``cancel`` on a running job).
    """

    lost: frozenset[Lease] = frozenset()
    cancel_requested: frozenset[Lease] = frozenset()


@dataclass(frozen=True, slots=True)
class Reaped:
    """One job the reaper took back: its old lease, and where it went (pending or failed)."""

    job_id: int
    attempt: int
    owner: str
    status: JobStatus
    stall_count: int


@dataclass(frozen=True, slots=True)
class DeadOwners:
    """What one :meth:`~tether.stores._roles.Liveness.dead_owners` check found (issue #22).

    ``workers``: worker ids whose liveness token is released (their process is gone) and that
    may still hold running jobs: every such owner of a running job is listed; a dead worker
    whose jobs a ``reap_dead`` already took back may be left out (a store may also list one
    that holds nothing). ``leaders``: the current leases, among the elections asked about,
    whose holder's token is released (the holder is the part of the stored holder string
    before its settings tag).
    """

    workers: tuple[str, ...] = ()
    leaders: tuple[Leadership, ...] = ()


@dataclass(frozen=True, slots=True)
class RetryResult:
    """What a dead-letter retry did.

    ``conflicts``: failed jobs left ``failed`` because their ``unique_key`` is now held by a
    live (pending or running) job: retrying them would make two live jobs with one key.
    """

    retried: int
    conflicts: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class QueueCount:
    queue: str
    status: JobStatus
    count: int


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker incarnation. ``id`` is fresh per process start; host and pid are for display."""

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    concurrency: int
    started_at: float = 0.0
    last_seen: float = 0.0


@dataclass(frozen=True, slots=True)
class Leadership:
    """A held leader lease. ``term`` grows by one on every acquisition of ``name``."""

    name: str
    holder: str
    term: int
    expires_at: float


@dataclass(frozen=True, slots=True)
class StoreInfo:
    """What a store tells about itself, for ``tether stats`` and docs."""

    kind: str
    url: str
    schema_version: int
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JobFilter:
    """What :meth:`Store.search_jobs` selects; ``None`` means any.

    ``since``: created at or after this epoch second. ``newest_first``: descending id order
    (the order people read job lists in); ascending otherwise.
    """

    status: JobStatus | None = None
    queue: str | None = None
    task: str | None = None
    since: float | None = None
    newest_first: bool = True


@dataclass(frozen=True, slots=True)
class ScheduleState:
    """What the store remembers of one periodic schedule (issue #12).

    ``last_tick``: the latest tick (epoch seconds) recorded for it, by an enqueue or a skip;
    ``last_job_id``: the job enqueued for the latest enqueued tick (None when none yet);
    ``updated_at``: store time of that write; ``spec``: what the schedule's ticks depended on
    when its latest tick was recorded (``Schedule.fingerprint``: spec and zone; None when an
    older release recorded it). The store, not a leader's memory, is what makes "one job per
    (schedule, tick)" hold across leader changes; and this record, never pruned, not the last
    job, is what tells a later leader that a deploy changed the schedule.
    """

    name: str
    last_tick: float
    last_job_id: int | None
    updated_at: float
    spec: str | None = None


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a store can do beyond the roles every store implements, declared once by the store
    (its ``capabilities`` attribute) so that a caller checks a flag instead of trying a call
    and reading the error.

    ``enqueue_in_transaction``: ``enqueue(..., conn=)`` (and its async producer's) writes on
    the caller's connection inside the caller's transaction, never committing it (the outbox
    pattern). ``complete_in_transaction``: ``finish(..., conn=)`` and ``transaction()`` do the
    same for a job's completion. Both are the :class:`tether.stores._contract.Transactional`
    ability. ``why_not``: what to tell a caller that asks for an ability declared absent,
    where the store knows better than the caller's plain "the X store cannot" (empty: it does
    not).
    """

    enqueue_in_transaction: bool = False
    complete_in_transaction: bool = False
    why_not: str = ""
    #: The :class:`tether.stores._roles.Liveness` ability (issue #22): the store can tell a
    #: worker process that died from one that is slow, so a dead process's jobs come back at
    #: once instead of when their leases run out. False: the lease alone decides, and
    #: ``liveness_why_not`` says why (a worker logs it once at start).
    detects_death: bool = False
    liveness_why_not: str = ""
