from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NewJob(_message.Message):
    __slots__ = ("task", "payload", "queue", "priority", "run_at", "delay", "max_attempts", "max_stalls", "unique_key", "limit_key", "after", "allow_failure")
    TASK_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    RUN_AT_FIELD_NUMBER: _ClassVar[int]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    MAX_STALLS_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_KEY_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    ALLOW_FAILURE_FIELD_NUMBER: _ClassVar[int]
    task: str
    payload: str
    queue: str
    priority: int
    run_at: float
    delay: float
    max_attempts: int
    max_stalls: int
    unique_key: str
    limit_key: str
    after: _containers.RepeatedScalarFieldContainer[int]
    allow_failure: bool
    def __init__(self, task: _Optional[str] = ..., payload: _Optional[str] = ..., queue: _Optional[str] = ..., priority: _Optional[int] = ..., run_at: _Optional[float] = ..., delay: _Optional[float] = ..., max_attempts: _Optional[int] = ..., max_stalls: _Optional[int] = ..., unique_key: _Optional[str] = ..., limit_key: _Optional[str] = ..., after: _Optional[_Iterable[int]] = ..., allow_failure: _Optional[bool] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("job_id", "attempt", "owner", "token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    attempt: int
    owner: str
    token: str
    def __init__(self, job_id: _Optional[int] = ..., attempt: _Optional[int] = ..., owner: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class JobRecord(_message.Message):
    __slots__ = ("id", "task", "queue", "payload", "status", "priority", "run_at", "attempt", "max_attempts", "failures", "stall_count", "max_stalls", "interruptions", "locked_by", "lease_until", "created_at", "started_at", "finished_at", "last_error", "failure_reason", "result", "checkpoint", "progress", "unique_key", "cancel_requested", "errors", "lease_token", "uid", "limit_key", "snoozes")
    ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    RUN_AT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    STALL_COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_STALLS_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTIONS_FIELD_NUMBER: _ClassVar[int]
    LOCKED_BY_FIELD_NUMBER: _ClassVar[int]
    LEASE_UNTIL_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    FAILURE_REASON_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_KEY_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_KEY_FIELD_NUMBER: _ClassVar[int]
    SNOOZES_FIELD_NUMBER: _ClassVar[int]
    id: int
    task: str
    queue: str
    payload: str
    status: str
    priority: int
    run_at: float
    attempt: int
    max_attempts: int
    failures: int
    stall_count: int
    max_stalls: int
    interruptions: int
    locked_by: str
    lease_until: float
    created_at: float
    started_at: float
    finished_at: float
    last_error: str
    failure_reason: str
    result: str
    checkpoint: str
    progress: str
    unique_key: str
    cancel_requested: bool
    errors: str
    lease_token: str
    uid: str
    limit_key: str
    snoozes: int
    def __init__(self, id: _Optional[int] = ..., task: _Optional[str] = ..., queue: _Optional[str] = ..., payload: _Optional[str] = ..., status: _Optional[str] = ..., priority: _Optional[int] = ..., run_at: _Optional[float] = ..., attempt: _Optional[int] = ..., max_attempts: _Optional[int] = ..., failures: _Optional[int] = ..., stall_count: _Optional[int] = ..., max_stalls: _Optional[int] = ..., interruptions: _Optional[int] = ..., locked_by: _Optional[str] = ..., lease_until: _Optional[float] = ..., created_at: _Optional[float] = ..., started_at: _Optional[float] = ..., finished_at: _Optional[float] = ..., last_error: _Optional[str] = ..., failure_reason: _Optional[str] = ..., result: _Optional[str] = ..., checkpoint: _Optional[str] = ..., progress: _Optional[str] = ..., unique_key: _Optional[str] = ..., cancel_requested: _Optional[bool] = ..., errors: _Optional[str] = ..., lease_token: _Optional[str] = ..., uid: _Optional[str] = ..., limit_key: _Optional[str] = ..., snoozes: _Optional[int] = ...) -> None: ...

class Outcome(_message.Message):
    __slots__ = ("lease", "kind", "result", "error", "reason", "retry_delay")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRY_DELAY_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    kind: str
    result: str
    error: str
    reason: str
    retry_delay: float
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ..., kind: _Optional[str] = ..., result: _Optional[str] = ..., error: _Optional[str] = ..., reason: _Optional[str] = ..., retry_delay: _Optional[float] = ...) -> None: ...

class FlowLimit(_message.Message):
    __slots__ = ("scope", "name", "concurrency", "rate", "per", "per_key")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    PER_FIELD_NUMBER: _ClassVar[int]
    PER_KEY_FIELD_NUMBER: _ClassVar[int]
    scope: str
    name: str
    concurrency: int
    rate: int
    per: float
    per_key: bool
    def __init__(self, scope: _Optional[str] = ..., name: _Optional[str] = ..., concurrency: _Optional[int] = ..., rate: _Optional[int] = ..., per: _Optional[float] = ..., per_key: _Optional[bool] = ...) -> None: ...

class JobLinks(_message.Message):
    __slots__ = ("job_id", "parents", "children", "waiting_on", "allow_failure")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    WAITING_ON_FIELD_NUMBER: _ClassVar[int]
    ALLOW_FAILURE_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    parents: _containers.RepeatedScalarFieldContainer[int]
    children: _containers.RepeatedScalarFieldContainer[int]
    waiting_on: int
    allow_failure: bool
    def __init__(self, job_id: _Optional[int] = ..., parents: _Optional[_Iterable[int]] = ..., children: _Optional[_Iterable[int]] = ..., waiting_on: _Optional[int] = ..., allow_failure: _Optional[bool] = ...) -> None: ...

class HeartbeatResult(_message.Message):
    __slots__ = ("lost", "cancel_requested")
    LOST_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    lost: _containers.RepeatedCompositeFieldContainer[Lease]
    cancel_requested: _containers.RepeatedCompositeFieldContainer[Lease]
    def __init__(self, lost: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ..., cancel_requested: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ...) -> None: ...

class Reaped(_message.Message):
    __slots__ = ("job_id", "attempt", "owner", "status", "stall_count")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STALL_COUNT_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    attempt: int
    owner: str
    status: str
    stall_count: int
    def __init__(self, job_id: _Optional[int] = ..., attempt: _Optional[int] = ..., owner: _Optional[str] = ..., status: _Optional[str] = ..., stall_count: _Optional[int] = ...) -> None: ...

class RetryResult(_message.Message):
    __slots__ = ("retried", "conflicts")
    RETRIED_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    retried: int
    conflicts: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, retried: _Optional[int] = ..., conflicts: _Optional[_Iterable[int]] = ...) -> None: ...

class QueueCount(_message.Message):
    __slots__ = ("queue", "status", "count")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    queue: str
    status: str
    count: int
    def __init__(self, queue: _Optional[str] = ..., status: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("id", "host", "pid", "queues", "concurrency", "started_at", "last_seen")
    ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
    id: str
    host: str
    pid: int
    queues: _containers.RepeatedScalarFieldContainer[str]
    concurrency: int
    started_at: float
    last_seen: float
    def __init__(self, id: _Optional[str] = ..., host: _Optional[str] = ..., pid: _Optional[int] = ..., queues: _Optional[_Iterable[str]] = ..., concurrency: _Optional[int] = ..., started_at: _Optional[float] = ..., last_seen: _Optional[float] = ...) -> None: ...

class Leadership(_message.Message):
    __slots__ = ("name", "holder", "term", "expires_at")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    name: str
    holder: str
    term: int
    expires_at: float
    def __init__(self, name: _Optional[str] = ..., holder: _Optional[str] = ..., term: _Optional[int] = ..., expires_at: _Optional[float] = ...) -> None: ...

class StoreInfo(_message.Message):
    __slots__ = ("kind", "url", "schema_version", "extra")
    class ExtraEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    KIND_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    kind: str
    url: str
    schema_version: int
    extra: _containers.ScalarMap[str, str]
    def __init__(self, kind: _Optional[str] = ..., url: _Optional[str] = ..., schema_version: _Optional[int] = ..., extra: _Optional[_Mapping[str, str]] = ...) -> None: ...

class JobFilter(_message.Message):
    __slots__ = ("status", "queue", "task", "since", "newest_first")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIRST_FIELD_NUMBER: _ClassVar[int]
    status: str
    queue: str
    task: str
    since: float
    newest_first: bool
    def __init__(self, status: _Optional[str] = ..., queue: _Optional[str] = ..., task: _Optional[str] = ..., since: _Optional[float] = ..., newest_first: _Optional[bool] = ...) -> None: ...

class ScheduleState(_message.Message):
    __slots__ = ("name", "last_tick", "last_job_id", "updated_at", "spec")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LAST_TICK_FIELD_NUMBER: _ClassVar[int]
    LAST_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    name: str
    last_tick: float
    last_job_id: int
    updated_at: float
    spec: str
    def __init__(self, name: _Optional[str] = ..., last_tick: _Optional[float] = ..., last_job_id: _Optional[int] = ..., updated_at: _Optional[float] = ..., spec: _Optional[str] = ...) -> None: ...

class Capabilities(_message.Message):
    __slots__ = ("enqueue_in_transaction", "complete_in_transaction", "why_not")
    ENQUEUE_IN_TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_IN_TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    WHY_NOT_FIELD_NUMBER: _ClassVar[int]
    enqueue_in_transaction: bool
    complete_in_transaction: bool
    why_not: str
    def __init__(self, enqueue_in_transaction: _Optional[bool] = ..., complete_in_transaction: _Optional[bool] = ..., why_not: _Optional[str] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HelloRequest(_message.Message):
    __slots__ = ("client_version",)
    CLIENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    client_version: str
    def __init__(self, client_version: _Optional[str] = ...) -> None: ...

class HelloReply(_message.Message):
    __slots__ = ("server_version", "store_kind", "capabilities", "role", "protocol_version")
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    STORE_KIND_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    server_version: str
    store_kind: str
    capabilities: Capabilities
    role: str
    protocol_version: int
    def __init__(self, server_version: _Optional[str] = ..., store_kind: _Optional[str] = ..., capabilities: _Optional[_Union[Capabilities, _Mapping]] = ..., role: _Optional[str] = ..., protocol_version: _Optional[int] = ...) -> None: ...

class NowReply(_message.Message):
    __slots__ = ("now",)
    NOW_FIELD_NUMBER: _ClassVar[int]
    now: float
    def __init__(self, now: _Optional[float] = ...) -> None: ...

class JobIdRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    def __init__(self, job_id: _Optional[int] = ...) -> None: ...

class GetJobReply(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: JobRecord
    def __init__(self, job: _Optional[_Union[JobRecord, _Mapping]] = ...) -> None: ...

class GetJobsRequest(_message.Message):
    __slots__ = ("job_ids",)
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, job_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class JobsReply(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobRecord]
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobRecord, _Mapping]]] = ...) -> None: ...

class MigrateReply(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class EnqueueRequest(_message.Message):
    __slots__ = ("jobs", "now", "request_id")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[NewJob]
    now: float
    request_id: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[NewJob, _Mapping]]] = ..., now: _Optional[float] = ..., request_id: _Optional[str] = ...) -> None: ...

class EnqueueReply(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ids: _Optional[_Iterable[int]] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("job_id", "now")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    now: float
    def __init__(self, job_id: _Optional[int] = ..., now: _Optional[float] = ...) -> None: ...

class CancelReply(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: str
    def __init__(self, result: _Optional[str] = ...) -> None: ...

class WaitForFinishRequest(_message.Message):
    __slots__ = ("job_ids", "timeout")
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    timeout: float
    def __init__(self, job_ids: _Optional[_Iterable[int]] = ..., timeout: _Optional[float] = ...) -> None: ...

class WokenReply(_message.Message):
    __slots__ = ("woken", "mark")
    WOKEN_FIELD_NUMBER: _ClassVar[int]
    MARK_FIELD_NUMBER: _ClassVar[int]
    woken: bool
    mark: str
    def __init__(self, woken: _Optional[bool] = ..., mark: _Optional[str] = ...) -> None: ...

class ClaimRequest(_message.Message):
    __slots__ = ("owner", "queues", "limit", "lease_ttl", "now", "request_id", "flow")
    OWNER_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    owner: str
    queues: _containers.RepeatedScalarFieldContainer[str]
    limit: int
    lease_ttl: float
    now: float
    request_id: str
    flow: _containers.RepeatedCompositeFieldContainer[FlowLimit]
    def __init__(self, owner: _Optional[str] = ..., queues: _Optional[_Iterable[str]] = ..., limit: _Optional[int] = ..., lease_ttl: _Optional[float] = ..., now: _Optional[float] = ..., request_id: _Optional[str] = ..., flow: _Optional[_Iterable[_Union[FlowLimit, _Mapping]]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("owner", "leases", "lease_ttl", "now")
    OWNER_FIELD_NUMBER: _ClassVar[int]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    owner: str
    leases: _containers.RepeatedCompositeFieldContainer[Lease]
    lease_ttl: float
    now: float
    def __init__(self, owner: _Optional[str] = ..., leases: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ..., lease_ttl: _Optional[float] = ..., now: _Optional[float] = ...) -> None: ...

class FinishRequest(_message.Message):
    __slots__ = ("outcomes", "now")
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[Outcome]
    now: float
    def __init__(self, outcomes: _Optional[_Iterable[_Union[Outcome, _Mapping]]] = ..., now: _Optional[float] = ...) -> None: ...

class FinishReply(_message.Message):
    __slots__ = ("rejected",)
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    rejected: _containers.RepeatedCompositeFieldContainer[Lease]
    def __init__(self, rejected: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ...) -> None: ...

class FencedTextRequest(_message.Message):
    __slots__ = ("lease", "text", "now")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    text: str
    now: float
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ..., text: _Optional[str] = ..., now: _Optional[float] = ...) -> None: ...

class BoolReply(_message.Message):
    __slots__ = ("ok",)
    OK_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    def __init__(self, ok: _Optional[bool] = ...) -> None: ...

class WaitForJobsRequest(_message.Message):
    __slots__ = ("queues", "timeout", "since")
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedScalarFieldContainer[str]
    timeout: float
    since: str
    def __init__(self, queues: _Optional[_Iterable[str]] = ..., timeout: _Optional[float] = ..., since: _Optional[str] = ...) -> None: ...

class WaitForSignalRequest(_message.Message):
    __slots__ = ("owner", "timeout", "since")
    OWNER_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    owner: str
    timeout: float
    since: str
    def __init__(self, owner: _Optional[str] = ..., timeout: _Optional[float] = ..., since: _Optional[str] = ...) -> None: ...

class QueuesRequest(_message.Message):
    __slots__ = ("queues",)
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, queues: _Optional[_Iterable[str]] = ...) -> None: ...

class QueuesReply(_message.Message):
    __slots__ = ("queues",)
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, queues: _Optional[_Iterable[str]] = ...) -> None: ...

class RegisterWorkerRequest(_message.Message):
    __slots__ = ("worker", "now")
    WORKER_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    worker: WorkerInfo
    now: float
    def __init__(self, worker: _Optional[_Union[WorkerInfo, _Mapping]] = ..., now: _Optional[float] = ...) -> None: ...

class UnregisterWorkerRequest(_message.Message):
    __slots__ = ("worker_id",)
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ...) -> None: ...

class ReapExpiredRequest(_message.Message):
    __slots__ = ("stall_grace", "now", "limit")
    STALL_GRACE_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    stall_grace: float
    now: float
    limit: int
    def __init__(self, stall_grace: _Optional[float] = ..., now: _Optional[float] = ..., limit: _Optional[int] = ...) -> None: ...

class ReapedReply(_message.Message):
    __slots__ = ("reaped",)
    REAPED_FIELD_NUMBER: _ClassVar[int]
    reaped: _containers.RepeatedCompositeFieldContainer[Reaped]
    def __init__(self, reaped: _Optional[_Iterable[_Union[Reaped, _Mapping]]] = ...) -> None: ...

class NextLeaseExpiryReply(_message.Message):
    __slots__ = ("at",)
    AT_FIELD_NUMBER: _ClassVar[int]
    at: float
    def __init__(self, at: _Optional[float] = ...) -> None: ...

class HousekeepingReply(_message.Message):
    __slots__ = ("done",)
    DONE_FIELD_NUMBER: _ClassVar[int]
    done: str
    def __init__(self, done: _Optional[str] = ...) -> None: ...

class PruneRequest(_message.Message):
    __slots__ = ("status", "older_than", "now", "limit")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OLDER_THAN_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    status: str
    older_than: float
    now: float
    limit: int
    def __init__(self, status: _Optional[str] = ..., older_than: _Optional[float] = ..., now: _Optional[float] = ..., limit: _Optional[int] = ...) -> None: ...

class CountReply(_message.Message):
    __slots__ = ("count",)
    COUNT_FIELD_NUMBER: _ClassVar[int]
    count: int
    def __init__(self, count: _Optional[int] = ...) -> None: ...

class DeleteDeadWorkersRequest(_message.Message):
    __slots__ = ("older_than", "now")
    OLDER_THAN_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    older_than: float
    now: float
    def __init__(self, older_than: _Optional[float] = ..., now: _Optional[float] = ...) -> None: ...

class LeaderAcquireRequest(_message.Message):
    __slots__ = ("name", "holder", "ttl", "now")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    name: str
    holder: str
    ttl: float
    now: float
    def __init__(self, name: _Optional[str] = ..., holder: _Optional[str] = ..., ttl: _Optional[float] = ..., now: _Optional[float] = ...) -> None: ...

class LeaderRenewRequest(_message.Message):
    __slots__ = ("name", "holder", "term", "ttl", "now")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    name: str
    holder: str
    term: int
    ttl: float
    now: float
    def __init__(self, name: _Optional[str] = ..., holder: _Optional[str] = ..., term: _Optional[int] = ..., ttl: _Optional[float] = ..., now: _Optional[float] = ...) -> None: ...

class LeaderReleaseRequest(_message.Message):
    __slots__ = ("name", "holder", "term")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    name: str
    holder: str
    term: int
    def __init__(self, name: _Optional[str] = ..., holder: _Optional[str] = ..., term: _Optional[int] = ...) -> None: ...

class LeaderNameRequest(_message.Message):
    __slots__ = ("name", "now")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    name: str
    now: float
    def __init__(self, name: _Optional[str] = ..., now: _Optional[float] = ...) -> None: ...

class LeadershipReply(_message.Message):
    __slots__ = ("leadership",)
    LEADERSHIP_FIELD_NUMBER: _ClassVar[int]
    leadership: Leadership
    def __init__(self, leadership: _Optional[_Union[Leadership, _Mapping]] = ...) -> None: ...

class ScheduleTickRequest(_message.Message):
    __slots__ = ("name", "tick", "job", "now", "spec")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TICK_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    name: str
    tick: float
    job: NewJob
    now: float
    spec: str
    def __init__(self, name: _Optional[str] = ..., tick: _Optional[float] = ..., job: _Optional[_Union[NewJob, _Mapping]] = ..., now: _Optional[float] = ..., spec: _Optional[str] = ...) -> None: ...

class ScheduleTickReply(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    def __init__(self, job_id: _Optional[int] = ...) -> None: ...

class SchedulesReply(_message.Message):
    __slots__ = ("schedules",)
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[ScheduleState]
    def __init__(self, schedules: _Optional[_Iterable[_Union[ScheduleState, _Mapping]]] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("status", "queue", "after_id", "limit")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    status: str
    queue: str
    after_id: int
    limit: int
    def __init__(self, status: _Optional[str] = ..., queue: _Optional[str] = ..., after_id: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class SearchJobsRequest(_message.Message):
    __slots__ = ("filter", "cursor", "limit")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    filter: JobFilter
    cursor: int
    limit: int
    def __init__(self, filter: _Optional[_Union[JobFilter, _Mapping]] = ..., cursor: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class CountsReply(_message.Message):
    __slots__ = ("counts",)
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    counts: _containers.RepeatedCompositeFieldContainer[QueueCount]
    def __init__(self, counts: _Optional[_Iterable[_Union[QueueCount, _Mapping]]] = ...) -> None: ...

class WorkersReply(_message.Message):
    __slots__ = ("workers",)
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ...) -> None: ...

class RetryFailedRequest(_message.Message):
    __slots__ = ("all", "job_ids", "now")
    ALL_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    all: bool
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    now: float
    def __init__(self, all: _Optional[bool] = ..., job_ids: _Optional[_Iterable[int]] = ..., now: _Optional[float] = ...) -> None: ...

class PurgeRequest(_message.Message):
    __slots__ = ("queue", "statuses")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    queue: str
    statuses: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, queue: _Optional[str] = ..., statuses: _Optional[_Iterable[str]] = ...) -> None: ...

class QueueRequest(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...
