"""One function per store method: request message in, reply message out, the store between.

Each runs on a thread of the server's store pool (store calls block). ``now`` is what the
service decided the call's clock is: None (the store's own, always in production) or the
client's ``now`` when the server trusts client clocks (the contract suite's fixtures only).
The waits, ``hello`` and ``migrate`` are the service's own (they need the event loop or the
caller's role).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from google.protobuf.message import Message

from tether._wire import codec
from tether._wire import tether_pb2 as pb
from tether.stores import Store

__all__ = ["HANDLERS", "WORKER_MIN_AGE", "Handler", "floor_worker_age"]

Handler = Callable[[Store, Any, "float | None"], Message]

_empty = pb.Empty()


def _leadership(x: Any) -> pb.LeadershipReply:
    return pb.LeadershipReply(leadership=None if x is None else codec.to_leadership(x))


def _jobs(jobs: Any) -> pb.JobsReply:
    to_job = codec.to_job
    return pb.JobsReply(jobs=[to_job(j) for j in jobs])


def _now(s: Store, r: Any, now: float | None) -> Message:
    return pb.NowReply(now=s.now())


def _info(s: Store, r: Any, now: float | None) -> Message:
    return codec.to_store_info(s.info())


def _get_job(s: Store, r: pb.JobIdRequest, now: float | None) -> Message:
    job = s.get_job(r.job_id)
    return pb.GetJobReply(job=None if job is None else codec.to_job(job))


def _check_schema(s: Store, r: Any, now: float | None) -> Message:
    s.check_schema()
    return _empty


def _enqueue(s: Store, r: pb.EnqueueRequest, now: float | None) -> Message:
    new_job_of = codec.new_job_of
    ids = s.enqueue([new_job_of(j) for j in r.jobs], now=now, request_id=r.request_id or None)
    return pb.EnqueueReply(ids=ids)


def _claim(s: Store, r: pb.ClaimRequest, now: float | None) -> Message:
    flow = [codec.flow_of(f) for f in r.flow]
    return _jobs(s.claim(r.owner, list(r.queues), r.limit, r.lease_ttl, now=now,
                         request_id=r.request_id or None, flow=flow))


def _heartbeat(s: Store, r: pb.HeartbeatRequest, now: float | None) -> Message:
    result = s.heartbeat(r.owner, codec.leases_of(r.leases), r.lease_ttl, now=now)
    return codec.to_heartbeat_result(result)


def _finish(s: Store, r: pb.FinishRequest, now: float | None) -> Message:
    outcome_of = codec.outcome_of
    rejected = s.finish([outcome_of(o) for o in r.outcomes], now=now)
    return pb.FinishReply(rejected=[codec.to_lease(x) for x in rejected])


def _retry_failed(s: Store, r: pb.RetryFailedRequest, now: float | None) -> Message:
    return codec.to_retry_result(s.retry_failed(None if r.all else list(r.job_ids), now=now))


def _schedule_tick(s: Store, r: pb.ScheduleTickRequest, now: float | None) -> Message:
    job = codec.new_job_of(r.job) if r.HasField("job") else None
    job_id = s.schedule_tick(r.name, r.tick, job, now=now, spec=codec.opt(r, "spec"))
    return pb.ScheduleTickReply(job_id=job_id)


def _list_jobs(s: Store, r: pb.ListJobsRequest, now: float | None) -> Message:
    return _jobs(s.list_jobs(status=codec.opt(r, "status"), queue=codec.opt(r, "queue"),
                             after_id=codec.opt(r, "after_id"), limit=r.limit))


def _search_jobs(s: Store, r: pb.SearchJobsRequest, now: float | None) -> Message:
    return _jobs(s.search_jobs(codec.filter_of(r.filter), cursor=codec.opt(r, "cursor"),
                               limit=r.limit))


def _not_negative(name: str, value: float) -> float:
    """A grace or age below zero would reach into the future: ``reap_expired`` would take
    back live leases (and, repeated, dead-letter running jobs as stalled), ``prune`` and
    ``delete_dead_workers`` would delete what is not old at all. No maintainer sends one."""
    if value < 0:
        raise ValueError(f"{name} must not be negative (got {value})")
    return value


#: The youngest a worker token's ``prune`` and ``delete_dead_workers`` reach. A worker token
#: may call them because a remote worker's maintainer runs the pruner, which sends the
#: retention settings (a day for done jobs by default) and a day for worker rows; an age
#: below a minute is no pruner's, but it would let any worker token delete every result a
#: moment after its job finished. An admin token prunes at any age.
WORKER_MIN_AGE = 60.0


def floor_worker_age(request: Message) -> None:
    """Raise the ``older_than`` of a worker token's ``prune`` or ``delete_dead_workers``
    request to WORKER_MIN_AGE (in place; other requests pass untouched). Raised, not
    refused: settings accept any positive retention, and a worker configured with a short
    one should keep pruning (later than asked) rather than fail every pass. A negative age is
    left for the handler to refuse as bad input, as an admin's is."""
    if (isinstance(request, pb.PruneRequest | pb.DeleteDeadWorkersRequest)
            and 0 <= request.older_than < WORKER_MIN_AGE):
        request.older_than = WORKER_MIN_AGE


def _reap_expired(s: Store, r: pb.ReapExpiredRequest, now: float | None) -> Message:
    reaped = s.reap_expired(_not_negative("stall_grace", r.stall_grace), now=now,
                            limit=r.limit)
    return pb.ReapedReply(reaped=[codec.to_reaped(x) for x in reaped])


def _prune(s: Store, r: pb.PruneRequest, now: float | None) -> Message:
    return pb.CountReply(count=s.prune(cast(Any, r.status),
                                       _not_negative("older_than", r.older_than), now=now,
                                       limit=r.limit))


def _delete_dead_workers(s: Store, r: pb.DeleteDeadWorkersRequest,
                         now: float | None) -> Message:
    return pb.CountReply(count=s.delete_dead_workers(_not_negative("older_than", r.older_than),
                                                     now=now))


def _register(s: Store, r: pb.RegisterWorkerRequest, now: float | None) -> Message:
    s.register_worker(codec.worker_of(r.worker), now=now)
    return _empty


def _notify(s: Store, r: pb.QueuesRequest, now: float | None) -> Message:
    s.notify(list(r.queues))
    return _empty


def _unregister(s: Store, r: pb.UnregisterWorkerRequest, now: float | None) -> Message:
    s.unregister_worker(r.worker_id)
    return _empty


#: RPC name -> (request type, handler). The waits, Hello and Migrate are the service's.
HANDLERS: dict[str, tuple[type[Message], Handler]] = {
    "Now": (pb.Empty, _now),
    "Info": (pb.Empty, _info),
    "GetJob": (pb.JobIdRequest, _get_job),
    "GetJobs": (pb.GetJobsRequest, lambda s, r, now: _jobs(s.get_jobs(list(r.job_ids)))),
    "JobLinks": (pb.JobIdRequest, lambda s, r, now: codec.to_links(s.job_links(r.job_id))),
    "CheckSchema": (pb.Empty, _check_schema),
    "Enqueue": (pb.EnqueueRequest, _enqueue),
    "Cancel": (pb.CancelRequest,
               lambda s, r, now: pb.CancelReply(result=s.cancel(r.job_id, now=now))),
    "Claim": (pb.ClaimRequest, _claim),
    "Heartbeat": (pb.HeartbeatRequest, _heartbeat),
    "Finish": (pb.FinishRequest, _finish),
    "SaveCheckpoint": (pb.FencedTextRequest, lambda s, r, now: pb.BoolReply(
        ok=s.save_checkpoint(codec.lease_of(r.lease), r.text, now=now))),
    "SetProgress": (pb.FencedTextRequest, lambda s, r, now: pb.BoolReply(
        ok=s.set_progress(codec.lease_of(r.lease), r.text, now=now))),
    "Notify": (pb.QueuesRequest, _notify),
    "PausedQueues": (pb.Empty, lambda s, r, now: pb.QueuesReply(queues=s.paused_queues())),
    "RegisterWorker": (pb.RegisterWorkerRequest, _register),
    "UnregisterWorker": (pb.UnregisterWorkerRequest, _unregister),
    "ReapExpired": (pb.ReapExpiredRequest, _reap_expired),
    "NextLeaseExpiry": (pb.Empty,
                        lambda s, r, now: pb.NextLeaseExpiryReply(at=s.next_lease_expiry())),
    "Housekeeping": (pb.Empty, lambda s, r, now: pb.HousekeepingReply(done=s.housekeeping())),
    "Prune": (pb.PruneRequest, _prune),
    "DeleteDeadWorkers": (pb.DeleteDeadWorkersRequest, _delete_dead_workers),
    "LeaderAcquire": (pb.LeaderAcquireRequest, lambda s, r, now: _leadership(
        s.leader_acquire(r.name, r.holder, r.ttl, now=now))),
    "LeaderRenew": (pb.LeaderRenewRequest, lambda s, r, now: _leadership(
        s.leader_renew(r.name, r.holder, r.term, r.ttl, now=now))),
    "LeaderRelease": (pb.LeaderReleaseRequest, lambda s, r, now: pb.BoolReply(
        ok=s.leader_release(r.name, r.holder, r.term))),
    "LeaderGet": (pb.LeaderNameRequest, lambda s, r, now: _leadership(s.leader_get(r.name))),
    "Leader": (pb.LeaderNameRequest, lambda s, r, now: _leadership(s.leader(r.name, now=now))),
    "ScheduleTick": (pb.ScheduleTickRequest, _schedule_tick),
    "Schedules": (pb.Empty, lambda s, r, now: pb.SchedulesReply(
        schedules=[codec.to_schedule(x) for x in s.schedules()])),
    "ListJobs": (pb.ListJobsRequest, _list_jobs),
    "SearchJobs": (pb.SearchJobsRequest, _search_jobs),
    "Counts": (pb.Empty, lambda s, r, now: pb.CountsReply(
        counts=[codec.to_queue_count(c) for c in s.counts()])),
    "ListWorkers": (pb.Empty, lambda s, r, now: pb.WorkersReply(
        workers=[codec.to_worker(w) for w in s.list_workers()])),
    "RetryFailed": (pb.RetryFailedRequest, _retry_failed),
    "Purge": (pb.PurgeRequest, lambda s, r, now: pb.CountReply(
        count=s.purge(r.queue, cast(Any, list(r.statuses))))),
    "PauseQueue": (pb.QueueRequest, lambda s, r, now: pb.BoolReply(ok=s.pause_queue(r.queue))),
    "ResumeQueue": (pb.QueueRequest,
                    lambda s, r, now: pb.BoolReply(ok=s.resume_queue(r.queue))),
}
