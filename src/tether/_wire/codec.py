"""Records <-> protobuf messages, both ways: the only place that knows both shapes.

Invariant: ``x_of(to_x(record)) == record`` for every record (tests/wire proves it field by
field), so nothing a store says changes on its way through the wire. ``None`` travels as an
unset proto3 ``optional`` field and comes back as ``None``; an empty string stays ``""``.

Cost matters on the worker's hot path (a claim returns a batch of jobs, a finish sends a
batch of outcomes): jobs are built with :func:`tether.stores._records.job_of` (no frozen
dataclass ``__init__``) and messages with keyword constructors (one C call each, ``None``
meaning unset).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from tether._wire import tether_pb2 as pb
from tether.stores._records import (
    Capabilities,
    FlowLimit,
    HeartbeatResult,
    JobFilter,
    JobLinks,
    JobRecord,
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
    job_of,
)

__all__ = [
    "capabilities_of", "filter_of", "flow_of", "heartbeat_result_of", "job_of_message",
    "jobs_of", "leadership_of", "lease_of", "leases_of", "links_of", "new_job_of",
    "opt", "outcome_of", "queue_count_of", "reaped_of", "retry_result_of",
    "schedule_of", "store_info_of", "to_capabilities", "to_filter", "to_flow",
    "to_heartbeat_result", "to_job", "to_leadership", "to_lease", "to_links", "to_new_job",
    "to_outcome", "to_queue_count", "to_reaped", "to_retry_result", "to_schedule",
    "to_store_info", "to_worker", "worker_of",
]


def opt(message: Any, name: str) -> Any:
    """The value of proto3 ``optional`` field ``name``, None when unset."""
    return getattr(message, name) if message.HasField(name) else None


# -- NewJob -----------------------------------------------------------------------------------
def to_new_job(job: NewJob) -> pb.NewJob:
    return pb.NewJob(
        task=job.task, payload=job.payload, queue=job.queue, priority=job.priority,
        run_at=job.run_at, delay=job.delay, max_attempts=job.max_attempts,
        max_stalls=job.max_stalls, unique_key=job.unique_key, limit_key=job.limit_key,
        after=job.after, allow_failure=job.allow_failure,
    )


def new_job_of(m: pb.NewJob) -> NewJob:
    return NewJob(
        task=m.task, payload=m.payload, queue=m.queue, priority=m.priority,
        run_at=m.run_at if m.HasField("run_at") else None, delay=m.delay,
        max_attempts=m.max_attempts, max_stalls=m.max_stalls,
        unique_key=m.unique_key if m.HasField("unique_key") else None,
        limit_key=m.limit_key if m.HasField("limit_key") else None,
        after=tuple(m.after), allow_failure=m.allow_failure,
    )


# -- Lease ------------------------------------------------------------------------------------
def to_lease(lease: Lease) -> pb.Lease:
    return pb.Lease(job_id=lease.job_id, attempt=lease.attempt, owner=lease.owner,
                    token=lease.token)


def lease_of(m: pb.Lease) -> Lease:
    return Lease(m.job_id, m.attempt, m.owner, m.token)


def leases_of(messages: Iterable[pb.Lease]) -> list[Lease]:
    return [Lease(m.job_id, m.attempt, m.owner, m.token) for m in messages]


# -- JobRecord --------------------------------------------------------------------------------
def to_job(j: JobRecord) -> pb.JobRecord:
    return pb.JobRecord(
        id=j.id, task=j.task, queue=j.queue, payload=j.payload, status=j.status,
        priority=j.priority, run_at=j.run_at, attempt=j.attempt, max_attempts=j.max_attempts,
        failures=j.failures, stall_count=j.stall_count, max_stalls=j.max_stalls,
        interruptions=j.interruptions, locked_by=j.locked_by, lease_until=j.lease_until,
        created_at=j.created_at, started_at=j.started_at, finished_at=j.finished_at,
        last_error=j.last_error, failure_reason=j.failure_reason, result=j.result,
        checkpoint=j.checkpoint, progress=j.progress, unique_key=j.unique_key,
        cancel_requested=j.cancel_requested, errors=j.errors, lease_token=j.lease_token,
        uid=j.uid, limit_key=j.limit_key, snoozes=j.snoozes,
    )


def job_of_message(m: pb.JobRecord) -> JobRecord:
    has = m.HasField
    return job_of((
        m.id, m.task, m.queue, m.payload, m.status, m.priority, m.run_at, m.attempt,
        m.max_attempts, m.failures, m.stall_count, m.max_stalls, m.interruptions,
        m.locked_by if has("locked_by") else None,
        m.lease_until if has("lease_until") else None,
        m.created_at,
        m.started_at if has("started_at") else None,
        m.finished_at if has("finished_at") else None,
        m.last_error if has("last_error") else None,
        m.failure_reason if has("failure_reason") else None,
        m.result if has("result") else None,
        m.checkpoint if has("checkpoint") else None,
        m.progress if has("progress") else None,
        m.unique_key if has("unique_key") else None,
        m.cancel_requested, m.errors,
        m.lease_token if has("lease_token") else None,
        m.uid,
        m.limit_key if has("limit_key") else None,
        m.snoozes,
    ))


def jobs_of(messages: Iterable[pb.JobRecord]) -> list[JobRecord]:
    return [job_of_message(m) for m in messages]


# -- Outcome ----------------------------------------------------------------------------------
def to_outcome(o: Outcome) -> pb.Outcome:
    lease = o.lease
    return pb.Outcome(
        lease=pb.Lease(job_id=lease.job_id, attempt=lease.attempt, owner=lease.owner,
                       token=lease.token),
        kind=o.kind, result=o.result, error=o.error, reason=o.reason,
        retry_delay=o.retry_delay,
    )


def outcome_of(m: pb.Outcome) -> Outcome:
    lease = m.lease
    return Outcome(
        Lease(lease.job_id, lease.attempt, lease.owner, lease.token),
        cast(Any, m.kind),
        m.result if m.HasField("result") else None,
        m.error if m.HasField("error") else None,
        cast(Any, m.reason) if m.HasField("reason") else None,
        m.retry_delay,
    )


# -- FlowLimit --------------------------------------------------------------------------------
def to_flow(f: FlowLimit) -> pb.FlowLimit:
    return pb.FlowLimit(scope=f.scope, name=f.name, concurrency=f.concurrency, rate=f.rate,
                        per=f.per, per_key=f.per_key)


def flow_of(m: pb.FlowLimit) -> FlowLimit:
    return FlowLimit(cast(Any, m.scope), m.name, opt(m, "concurrency"), opt(m, "rate"),
                     m.per, m.per_key)


# -- small records ----------------------------------------------------------------------------
def to_links(x: JobLinks) -> pb.JobLinks:
    return pb.JobLinks(job_id=x.job_id, parents=x.parents, children=x.children,
                       waiting_on=x.waiting_on, allow_failure=x.allow_failure)


def links_of(m: pb.JobLinks) -> JobLinks:
    return JobLinks(m.job_id, tuple(m.parents), tuple(m.children), m.waiting_on,
                    m.allow_failure)


def to_heartbeat_result(r: HeartbeatResult) -> pb.HeartbeatResult:
    return pb.HeartbeatResult(lost=[to_lease(x) for x in r.lost],
                              cancel_requested=[to_lease(x) for x in r.cancel_requested])


def heartbeat_result_of(m: pb.HeartbeatResult) -> HeartbeatResult:
    return HeartbeatResult(frozenset(leases_of(m.lost)),
                           frozenset(leases_of(m.cancel_requested)))


def to_reaped(r: Reaped) -> pb.Reaped:
    return pb.Reaped(job_id=r.job_id, attempt=r.attempt, owner=r.owner, status=r.status,
                     stall_count=r.stall_count)


def reaped_of(m: pb.Reaped) -> Reaped:
    return Reaped(m.job_id, m.attempt, m.owner, cast(Any, m.status), m.stall_count)


def to_retry_result(r: RetryResult) -> pb.RetryResult:
    return pb.RetryResult(retried=r.retried, conflicts=r.conflicts)


def retry_result_of(m: pb.RetryResult) -> RetryResult:
    return RetryResult(m.retried, tuple(m.conflicts))


def to_queue_count(c: QueueCount) -> pb.QueueCount:
    return pb.QueueCount(queue=c.queue, status=c.status, count=c.count)


def queue_count_of(m: pb.QueueCount) -> QueueCount:
    return QueueCount(m.queue, cast(Any, m.status), m.count)


def to_worker(w: WorkerInfo) -> pb.WorkerInfo:
    return pb.WorkerInfo(id=w.id, host=w.host, pid=w.pid, queues=w.queues,
                         concurrency=w.concurrency, started_at=w.started_at,
                         last_seen=w.last_seen)


def worker_of(m: pb.WorkerInfo) -> WorkerInfo:
    return WorkerInfo(m.id, m.host, m.pid, tuple(m.queues), m.concurrency, m.started_at,
                      m.last_seen)


def to_leadership(x: Leadership) -> pb.Leadership:
    return pb.Leadership(name=x.name, holder=x.holder, term=x.term, expires_at=x.expires_at)


def leadership_of(m: pb.Leadership) -> Leadership:
    return Leadership(m.name, m.holder, m.term, m.expires_at)


def to_store_info(x: StoreInfo) -> pb.StoreInfo:
    return pb.StoreInfo(kind=x.kind, url=x.url, schema_version=x.schema_version,
                        extra=x.extra)


def store_info_of(m: pb.StoreInfo) -> StoreInfo:
    return StoreInfo(m.kind, m.url, m.schema_version, dict(m.extra))


def to_filter(f: JobFilter) -> pb.JobFilter:
    return pb.JobFilter(status=f.status, queue=f.queue, task=f.task, since=f.since,
                        newest_first=f.newest_first)


def filter_of(m: pb.JobFilter) -> JobFilter:
    return JobFilter(opt(m, "status"), opt(m, "queue"), opt(m, "task"), opt(m, "since"),
                     m.newest_first)


def to_schedule(s: ScheduleState) -> pb.ScheduleState:
    return pb.ScheduleState(name=s.name, last_tick=s.last_tick, last_job_id=s.last_job_id,
                            updated_at=s.updated_at, spec=s.spec)


def schedule_of(m: pb.ScheduleState) -> ScheduleState:
    return ScheduleState(m.name, m.last_tick, opt(m, "last_job_id"), m.updated_at,
                         opt(m, "spec"))


def to_capabilities(c: Capabilities) -> pb.Capabilities:
    return pb.Capabilities(enqueue_in_transaction=c.enqueue_in_transaction,
                           complete_in_transaction=c.complete_in_transaction,
                           why_not=c.why_not)


def capabilities_of(m: pb.Capabilities) -> Capabilities:
    return Capabilities(m.enqueue_in_transaction, m.complete_in_transaction, m.why_not)

