"""Every record survives the wire: ``x_of(to_x(record)) == record``, through bytes.

Each record is checked twice: once with every optional field set (so a field the codec
forgot would come back as its default) and once with every optional field None (so None
does not come back as "" or 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

import pytest

from tether._wire import codec
from tether._wire import tether_pb2 as pb
from tether.stores import (
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
)

LEASE = Lease(7, 3, "worker-1", "ab" * 16)

FULL_JOB = JobRecord(
    id=12, task="pkg.task", queue="q", payload='[[1], {"a": "é🚀"}]', status="running",
    priority=-4, run_at=1.5e9 + 0.25, attempt=3, max_attempts=5, failures=1, stall_count=1,
    max_stalls=3, interruptions=2, locked_by="w", lease_until=1.5e9 + 30.125,
    created_at=1.5e9 - 1, started_at=1.5e9, finished_at=1.5e9 + 2, last_error="boom\x00",
    failure_reason="error", result='{"r": 1}', checkpoint='"cp"', progress='"50%"',
    unique_key="u", cancel_requested=True, errors='[{"attempt": 1}]', lease_token="cd" * 16,
    uid="ef" * 16, limit_key="k", snoozes=4,
)
BARE_JOB = replace(
    FULL_JOB, status="pending", locked_by=None, lease_until=None, started_at=None,
    finished_at=None, last_error=None, failure_reason=None, result=None, checkpoint=None,
    progress=None, unique_key=None, cancel_requested=False, lease_token=None, limit_key=None,
    errors="[]", payload="",
)

CASES: list[tuple[object, Callable[[Any], Any], Callable[[Any], Any], type]] = [
    (NewJob("t", '[[], {"x": 1}]', "q", -1, 12.5, 3.0, 7, 2, "u", "k", (1, 2, 2), True),
     codec.to_new_job, codec.new_job_of, pb.NewJob),
    (NewJob("t", run_at=None, unique_key=None, limit_key=None, after=()),
     codec.to_new_job, codec.new_job_of, pb.NewJob),
    (NewJob("t", run_at=0.0, unique_key="", limit_key=""),
     codec.to_new_job, codec.new_job_of, pb.NewJob),
    (LEASE, codec.to_lease, codec.lease_of, pb.Lease),
    (FULL_JOB, codec.to_job, codec.job_of_message, pb.JobRecord),
    (BARE_JOB, codec.to_job, codec.job_of_message, pb.JobRecord),
    (Outcome(LEASE, "error", '"r"', "e", "timeout", 2.5),
     codec.to_outcome, codec.outcome_of, pb.Outcome),
    (Outcome(LEASE, "done"), codec.to_outcome, codec.outcome_of, pb.Outcome),
    (FlowLimit("task", "t", 3, 10, 1.5, True), codec.to_flow, codec.flow_of, pb.FlowLimit),
    (FlowLimit("queue", "q"), codec.to_flow, codec.flow_of, pb.FlowLimit),
    (FlowLimit("queue", "q", concurrency=0, rate=0),
     codec.to_flow, codec.flow_of, pb.FlowLimit),
    (JobLinks(5, (1, 2), (8, 9), 1, True), codec.to_links, codec.links_of, pb.JobLinks),
    (JobLinks(5), codec.to_links, codec.links_of, pb.JobLinks),
    (HeartbeatResult(frozenset({LEASE}), frozenset({replace(LEASE, job_id=8)})),
     codec.to_heartbeat_result, codec.heartbeat_result_of, pb.HeartbeatResult),
    (HeartbeatResult(), codec.to_heartbeat_result, codec.heartbeat_result_of,
     pb.HeartbeatResult),
    (Reaped(1, 2, "w", "failed", 3), codec.to_reaped, codec.reaped_of, pb.Reaped),
    (RetryResult(3, (4, 5)), codec.to_retry_result, codec.retry_result_of, pb.RetryResult),
    (QueueCount("q", "done", 9), codec.to_queue_count, codec.queue_count_of, pb.QueueCount),
    (WorkerInfo("id", "host", 42, ("a", "b"), 10, 1.25, 2.5),
     codec.to_worker, codec.worker_of, pb.WorkerInfo),
    (Leadership("reaper", "h", 7, 99.5), codec.to_leadership, codec.leadership_of,
     pb.Leadership),
    (StoreInfo("postgres", "postgresql://u:***@h/db", 9, {"a": "b"}),
     codec.to_store_info, codec.store_info_of, pb.StoreInfo),
    (JobFilter("failed", "q", "t", 12.5, False), codec.to_filter, codec.filter_of,
     pb.JobFilter),
    (JobFilter(), codec.to_filter, codec.filter_of, pb.JobFilter),
    (ScheduleState("s", 60.0, 12, 61.5, "*/5 * * * * UTC"),
     codec.to_schedule, codec.schedule_of, pb.ScheduleState),
    (ScheduleState("s", 60.0, None, 61.5, None),
     codec.to_schedule, codec.schedule_of, pb.ScheduleState),
    (Capabilities(True, False, "why"), codec.to_capabilities, codec.capabilities_of,
     pb.Capabilities),
]


@pytest.mark.parametrize(("record", "encode", "decode", "message"), CASES,
                         ids=[f"{type(c[0]).__name__}-{i}" for i, c in enumerate(CASES)])
def test_round_trip(record: object, encode: Callable[[Any], Any],
                    decode: Callable[[Any], Any], message: type) -> None:
    data = encode(record).SerializeToString()
    back = decode(message.FromString(data))
    assert back == record
    assert type(back) is type(record)
    for f in fields(record):  # type: ignore[arg-type]
        assert type(getattr(back, f.name)) is type(getattr(record, f.name)), f.name


#: Records that never cross the wire, and why: a new one must be added here on purpose.
OFF_THE_WIRE = {
    # The Liveness role (issue #22): a remote store answers it locally with "no liveness"
    # (a cut stream is not a death), so no RPC carries its check's result.
    "DeadOwners",
}


def test_every_record_has_a_case() -> None:
    """A record added to the contract without a codec case fails here."""
    from tether.stores import _records

    records = {name for name, obj in vars(_records).items()
               if isinstance(obj, type) and hasattr(obj, "__dataclass_fields__")}
    covered = {type(c[0]).__name__ for c in CASES}
    assert records - covered == OFF_THE_WIRE


def test_the_round_trip_check_can_fail() -> None:
    """A decoder that drops a field is caught by the equality above."""
    m = pb.JobRecord.FromString(codec.to_job(FULL_JOB).SerializeToString())
    m.ClearField("limit_key")
    assert codec.job_of_message(m) != FULL_JOB


def test_every_job_field_is_on_the_wire() -> None:
    wire = {f.name for f in pb.JobRecord.DESCRIPTOR.fields}
    assert wire == {f.name for f in fields(JobRecord)}
