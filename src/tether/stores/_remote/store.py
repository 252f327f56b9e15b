"""RemoteStore: every role of the store contract, spoken to a ``tether server``.

Invariants:

* Semantics are the store's behind the server, unchanged: this class only encodes, calls and
  decodes (:mod:`tether._wire.codec`); fences, counting rules, the clock and input checks are
  the server's store's.
* Replay: ``enqueue`` and ``claim`` draw their ``request_id`` here when the caller passed
  None, before the first try, so the channel's retries and failover send the same id and a
  lost reply never duplicates a job nor orphans a claim.
* Transactions stay on the server's side: :attr:`capabilities` declares neither transactional
  ability (``why_not`` says so).
* Long polls are cut into server-sized slices (:data:`MAX_WAIT`): a wait longer than the
  server holds one is several calls.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, cast

from tether import _clock as clock
from tether._errors import StoreUnavailable
from tether._limits import check_job_id, check_jobs, check_json_text
from tether._text import clean_optional
from tether._wire import codec
from tether._wire import tether_pb2 as pb
from tether.stores._aio import ThreadedProducer
from tether.stores._contract import (
    AsyncProducer,
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
    Store,
    StoreInfo,
    WorkerInfo,
)
from tether.stores._deadline import take_deadline
from tether.stores._remote.channel import Channels
from tether.stores._remote.url import RemoteURL
from tether.stores._replay import new_request_id
from tether.stores._schedule_args import check_spec, check_tick
from tether.stores._urls import redact

__all__ = ["MAX_WAIT", "WHY_NOT", "RemoteStore"]

#: The longest wait one long poll asks the server for (the server caps it there too).
MAX_WAIT = 30.0
#: How often a wait probes an unreachable server for its return.
PROBE = 0.1
WHY_NOT = "through tether://, transactions stay on the server's side"
#: Why a remote worker has no liveness token (issue #22): the server cannot tell a dead
#: process from a cut stream (seed 003), so the lease alone decides for it.
LIVENESS_WHY_NOT = ("through tether://, a dropped connection is not a death (the server "
                    "cannot tell a dead process from a cut stream): the lease alone decides")
_EMPTY = pb.Empty()


class RemoteStore:
    """A store reached through ``tether://HOST:PORT`` (``tethers://`` for TLS)."""

    kind = "tether"
    capabilities = Capabilities(False, False, WHY_NOT, detects_death=False,
                                liveness_why_not=LIVENESS_WHY_NOT)

    def __init__(self, url: str, *, deadline: float | None = None) -> None:
        self.url = url
        rest, self.deadline = take_deadline(url, deadline)
        self._parsed = RemoteURL.parse(rest)
        self._rpc = Channels(self._parsed, self.deadline)
        self._call = self._rpc.call
        #: The server's wake-up mark per queue set (see WaitForJobsRequest.since).
        self._marks: dict[tuple[str, ...], str] = {}
        #: The server's signal mark per worker (see WaitForSignalRequest.since).
        self._signal_marks: dict[str, str] = {}
        self._producer: ThreadedProducer | None = None
        self._producer_lock = threading.Lock()

    # -- Basics -----------------------------------------------------------------------------
    def now(self) -> float:
        now: float = self._call("Now", _EMPTY, pb.NowReply).now
        return now

    def info(self) -> StoreInfo:
        theirs = codec.store_info_of(self._call("Info", _EMPTY, pb.StoreInfo))
        extra = {**theirs.extra, "server_store": theirs.kind, "server_store_url": theirs.url}
        return StoreInfo(self.kind, _masked(self.url), theirs.schema_version, extra)

    def hello(self) -> pb.HelloReply:
        """Who the server is and what this store's token may do."""
        from tether._version import __version__

        return self._call("Hello", pb.HelloRequest(client_version=__version__),
                          pb.HelloReply)

    def get_job(self, job_id: int) -> JobRecord | None:
        reply = self._call("GetJob", pb.JobIdRequest(job_id=check_job_id(job_id)),
                           pb.GetJobReply)
        return codec.job_of_message(reply.job) if reply.HasField("job") else None

    def get_jobs(self, job_ids: Sequence[int]) -> list[JobRecord]:
        ids = [check_job_id(i) for i in job_ids]
        reply = self._call("GetJobs", pb.GetJobsRequest(job_ids=ids), pb.JobsReply)
        return codec.jobs_of(reply.jobs)

    def job_links(self, job_id: int) -> JobLinks:
        request = pb.JobIdRequest(job_id=check_job_id(job_id))
        return codec.links_of(self._call("JobLinks", request, pb.JobLinks))

    def close(self) -> None:
        with self._producer_lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            producer.close()
        self._rpc.close()

    # -- Lifecycle --------------------------------------------------------------------------
    def migrate(self) -> int:
        version: int = self._call("Migrate", _EMPTY, pb.MigrateReply).version
        return version

    def check_schema(self) -> None:
        self._call("CheckSchema", _EMPTY, pb.Empty)

    # -- Producer ---------------------------------------------------------------------------
    def enqueue(self, jobs: Sequence[NewJob], *, now: float | None = None,
                request_id: str | None = None) -> list[int]:
        check_jobs(jobs)  # as the store would: its errors, before anything is sent
        to_new_job = codec.to_new_job
        request = pb.EnqueueRequest(jobs=[to_new_job(j) for j in jobs], now=now,
                                    request_id=request_id or new_request_id())
        return list(self._call("Enqueue", request, pb.EnqueueReply).ids)

    def cancel(self, job_id: int, *, now: float | None = None) -> CancelResult:
        request = pb.CancelRequest(job_id=check_job_id(job_id), now=now)
        reply = self._call("Cancel", request, pb.CancelReply)
        return cast(CancelResult, reply.result)

    def wait_for_finish(self, job_ids: Sequence[int], timeout: float) -> bool:
        ids = [check_job_id(i) for i in job_ids]
        return self._wait(lambda t: self._call(
            "WaitForFinish", pb.WaitForFinishRequest(job_ids=ids, timeout=t), pb.WokenReply,
            wait=t).woken, timeout)

    def async_producer(self) -> AsyncProducer:
        with self._producer_lock:
            if self._producer is None or self._producer.closed:
                store: Store = self
                self._producer = ThreadedProducer(store)
            return self._producer

    # -- Leases -----------------------------------------------------------------------------
    def claim(self, owner: str, queues: Sequence[str], limit: int, lease_ttl: float, *,
              now: float | None = None, request_id: str | None = None,
              flow: Sequence[FlowLimit] = ()) -> list[JobRecord]:
        request = pb.ClaimRequest(
            owner=owner, queues=queues, limit=limit, lease_ttl=lease_ttl, now=now,
            request_id=request_id or new_request_id(),
            flow=[codec.to_flow(f) for f in flow])
        return codec.jobs_of(self._call("Claim", request, pb.JobsReply).jobs)

    def heartbeat(self, owner: str, leases: Sequence[Lease], lease_ttl: float, *,
                  now: float | None = None) -> HeartbeatResult:
        to_lease = codec.to_lease
        request = pb.HeartbeatRequest(owner=owner, leases=[to_lease(x) for x in leases],
                                      lease_ttl=lease_ttl, now=now)
        return codec.heartbeat_result_of(self._call("Heartbeat", request, pb.HeartbeatResult))

    def finish(self, outcomes: Sequence[Outcome], *, now: float | None = None) -> list[Lease]:
        to_outcome = codec.to_outcome
        for o in outcomes:
            if o.result is not None:
                check_json_text(o.result, "result")
        # Error text is cleaned as the store would clean it (a lone surrogate cannot travel
        # as protobuf text); cleaning twice changes nothing.
        sent = [to_outcome(o if o.error is None or o.error.isascii() else
                           Outcome(o.lease, o.kind, o.result, clean_optional(o.error),
                                   o.reason, o.retry_delay)) for o in outcomes]
        reply = self._call("Finish", pb.FinishRequest(outcomes=sent, now=now),
                           pb.FinishReply)
        return codec.leases_of(reply.rejected)

    def save_checkpoint(self, lease: Lease, checkpoint: str, *,
                        now: float | None = None) -> bool:
        check_json_text(checkpoint, "checkpoint")
        request = pb.FencedTextRequest(lease=codec.to_lease(lease), text=checkpoint, now=now)
        ok: bool = self._call("SaveCheckpoint", request, pb.BoolReply).ok
        return ok

    def set_progress(self, lease: Lease, progress: str, *, now: float | None = None) -> bool:
        check_json_text(progress, "progress")
        request = pb.FencedTextRequest(lease=codec.to_lease(lease), text=progress, now=now)
        ok: bool = self._call("SetProgress", request, pb.BoolReply).ok
        return ok

    def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> bool:
        names = list(queues)
        key = tuple(sorted(set(names)))

        def poll(t: float) -> bool:
            request = pb.WaitForJobsRequest(queues=names, timeout=t,
                                            since=self._marks.get(key, ""))
            reply = self._call("WaitForJobs", request, pb.WokenReply, wait=t)
            self._marks[key] = reply.mark
            woken: bool = reply.woken
            return woken

        return self._wait(poll, timeout)

    def wait_for_signal(self, owner: str, timeout: float) -> bool:
        def poll(t: float) -> bool:
            request = pb.WaitForSignalRequest(owner=owner, timeout=t,
                                              since=self._signal_marks.get(owner, ""))
            reply = self._call("WaitForSignal", request, pb.WokenReply, wait=t)
            self._signal_marks[owner] = reply.mark
            woken: bool = reply.woken
            return woken

        return self._wait(poll, timeout)

    def notify(self, queues: Sequence[str]) -> None:
        self._call("Notify", pb.QueuesRequest(queues=queues), pb.Empty)

    def paused_queues(self) -> list[str]:
        return list(self._call("PausedQueues", _EMPTY, pb.QueuesReply).queues)

    def register_worker(self, worker: WorkerInfo, *, now: float | None = None) -> None:
        request = pb.RegisterWorkerRequest(worker=codec.to_worker(worker), now=now)
        self._call("RegisterWorker", request, pb.Empty)

    def unregister_worker(self, worker_id: str) -> None:
        self._call("UnregisterWorker", pb.UnregisterWorkerRequest(worker_id=worker_id),
                   pb.Empty)

    # -- Maintenance ------------------------------------------------------------------------
    def reap_expired(self, stall_grace: float = 0.0, *, now: float | None = None,
                     limit: int = 1000) -> list[Reaped]:
        request = pb.ReapExpiredRequest(stall_grace=stall_grace, now=now, limit=limit)
        reply = self._call("ReapExpired", request, pb.ReapedReply)
        return [codec.reaped_of(x) for x in reply.reaped]

    def next_lease_expiry(self) -> float | None:
        reply = self._call("NextLeaseExpiry", _EMPTY, pb.NextLeaseExpiryReply)
        return reply.at if reply.HasField("at") else None

    def housekeeping(self) -> str | None:
        reply = self._call("Housekeeping", _EMPTY, pb.HousekeepingReply)
        return reply.done if reply.HasField("done") else None

    def prune(self, status: JobStatus, older_than: float, *, now: float | None = None,
              limit: int = 1000) -> int:
        request = pb.PruneRequest(status=status, older_than=older_than, now=now, limit=limit)
        count: int = self._call("Prune", request, pb.CountReply).count
        return count

    def delete_dead_workers(self, older_than: float, *, now: float | None = None) -> int:
        request = pb.DeleteDeadWorkersRequest(older_than=older_than, now=now)
        count: int = self._call("DeleteDeadWorkers", request, pb.CountReply).count
        return count

    def _leadership(self, rpc: str, request: Any) -> Leadership | None:
        reply = self._call(rpc, request, pb.LeadershipReply)
        return codec.leadership_of(reply.leadership) if reply.HasField("leadership") else None

    def leader_acquire(self, name: str, holder: str, ttl: float, *,
                       now: float | None = None) -> Leadership | None:
        return self._leadership("LeaderAcquire", pb.LeaderAcquireRequest(
            name=name, holder=holder, ttl=ttl, now=now))

    def leader_renew(self, name: str, holder: str, term: int, ttl: float, *,
                     now: float | None = None) -> Leadership | None:
        return self._leadership("LeaderRenew", pb.LeaderRenewRequest(
            name=name, holder=holder, term=term, ttl=ttl, now=now))

    def leader_release(self, name: str, holder: str, term: int) -> bool:
        request = pb.LeaderReleaseRequest(name=name, holder=holder, term=term)
        ok: bool = self._call("LeaderRelease", request, pb.BoolReply).ok
        return ok

    def leader_get(self, name: str) -> Leadership | None:
        return self._leadership("LeaderGet", pb.LeaderNameRequest(name=name))

    def leader(self, name: str, *, now: float | None = None) -> Leadership | None:
        return self._leadership("Leader", pb.LeaderNameRequest(name=name, now=now))

    def schedule_tick(self, name: str, tick: float, job: NewJob | None, *,
                      now: float | None = None, spec: str | None = None) -> int | None:
        name, tick = check_tick(name, tick, job)
        spec = check_spec(spec)
        request = pb.ScheduleTickRequest(
            name=name, tick=tick, job=None if job is None else codec.to_new_job(job),
            now=now, spec=spec)
        reply = self._call("ScheduleTick", request, pb.ScheduleTickReply)
        return reply.job_id if reply.HasField("job_id") else None

    def schedules(self) -> list[ScheduleState]:
        reply = self._call("Schedules", _EMPTY, pb.SchedulesReply)
        return [codec.schedule_of(s) for s in reply.schedules]

    # -- Liveness: the "no liveness" answer of the contract, answered here without a call --
    def take_liveness(self, worker_id: str) -> bool:
        return False

    def release_liveness(self, worker_id: str) -> None:
        return None

    def dead_owners(self, elections: Sequence[str] = ()) -> DeadOwners:
        return DeadOwners()

    def dead_workers(self, worker_ids: Sequence[str]) -> frozenset[str]:
        return frozenset()

    def reap_dead(self, owners: Sequence[str], *, now: float | None = None,
                  limit: int = 1000) -> list[Reaped]:
        return []

    # -- Admin ------------------------------------------------------------------------------
    def list_jobs(self, *, status: JobStatus | None = None, queue: str | None = None,
                  after_id: int | None = None, limit: int = 100) -> list[JobRecord]:
        request = pb.ListJobsRequest(status=status, queue=queue, after_id=after_id,
                                     limit=limit)
        return codec.jobs_of(self._call("ListJobs", request, pb.JobsReply).jobs)

    def search_jobs(self, filter: JobFilter, *, cursor: int | None = None,
                    limit: int = 100) -> list[JobRecord]:
        request = pb.SearchJobsRequest(filter=codec.to_filter(filter), cursor=cursor,
                                       limit=limit)
        return codec.jobs_of(self._call("SearchJobs", request, pb.JobsReply).jobs)

    def counts(self) -> list[QueueCount]:
        reply = self._call("Counts", _EMPTY, pb.CountsReply)
        return [codec.queue_count_of(c) for c in reply.counts]

    def list_workers(self) -> list[WorkerInfo]:
        reply = self._call("ListWorkers", _EMPTY, pb.WorkersReply)
        return [codec.worker_of(w) for w in reply.workers]

    def retry_failed(self, job_ids: Sequence[int] | None, *,
                     now: float | None = None) -> RetryResult:
        ids = [] if job_ids is None else [check_job_id(i) for i in job_ids]
        request = pb.RetryFailedRequest(all=job_ids is None, job_ids=ids, now=now)
        return codec.retry_result_of(self._call("RetryFailed", request, pb.RetryResult))

    def purge(self, queue: str, statuses: Sequence[JobStatus]) -> int:
        count: int = self._call("Purge", pb.PurgeRequest(queue=queue, statuses=statuses),
                                pb.CountReply).count
        return count

    def pause_queue(self, queue: str) -> bool:
        ok: bool = self._call("PauseQueue", pb.QueueRequest(queue=queue), pb.BoolReply).ok
        return ok

    def resume_queue(self, queue: str) -> bool:
        ok: bool = self._call("ResumeQueue", pb.QueueRequest(queue=queue), pb.BoolReply).ok
        return ok

    # -- plumbing ---------------------------------------------------------------------------
    def _wait(self, call: Any, timeout: float) -> bool:
        """Long polls of at most MAX_WAIT seconds each until ``timeout`` has passed.

        A wait never raises for an unreachable server: it probes every :data:`PROBE` s
        until the deadline, and the server's return is itself a wake-up (notifications sent
        meanwhile were lost), so an idle worker claims again at once."""
        deadline = clock.monotonic() + max(0.0, timeout)
        lost = False
        while True:
            left = deadline - clock.monotonic()
            if left <= 0:
                return False
            try:
                if lost:  # probe: is the server back?
                    self._call("Now", _EMPTY, pb.NowReply,
                               timeout=max(0.05, min(left, self.deadline)))
                    return True
                woken: bool = call(min(left, MAX_WAIT))
            except StoreUnavailable:
                lost = True
                clock.sleep(min(PROBE, max(0.0, deadline - clock.monotonic())))
                continue
            if woken:
                return True
            if left <= MAX_WAIT:
                return False

    def __repr__(self) -> str:
        return f"RemoteStore({_masked(self.url)!r})"


def _masked(url: str) -> str:
    """``url`` with its token (the whole user info of a tether:// URL) masked, and any other
    secret :func:`redact` knows of: what info() and repr() show."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, hosts = rest.partition("@")
    if sep and at and "/" not in userinfo:
        return redact(f"{scheme}://***@{hosts}")
    return redact(url)

