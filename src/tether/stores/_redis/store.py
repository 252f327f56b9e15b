"""The Redis store: every multi-key step is one Lua script, run with EVALSHA.

Invariants (those of :mod:`tether.stores._contract`, kept the Redis way):

* Each state change of a job (enqueue, claim, heartbeat, finish, reap, cancel, retry_failed,
  checkpoint/progress, prune) is ONE script over a whole batch, so Redis' single-threaded
  script execution makes it atomic: no client ever sees a job half-moved between indexes, and
  two claimers can never take the same (job, attempt). Redis never rolls a script back, so
  scripts check their input before the first write (a batch is all or nothing).
* Every write about a running job is fenced inside its script by (id, attempt, owner, token)
  and ``status == 'running'``; the token (``<nonce>:<id>``, nonce 128 random bits per claim)
  keeps old claims fenced off new jobs when ids are reused after data loss.
* Every call is safe to repeat (redis-py's retry replays a script whose reply was lost): a
  request id makes enqueue, claim, cancel and retry_failed answer a repeat from the record
  their first run wrote; finish recognises its own applied outcome by the kept token;
  heartbeat, checkpoint/progress, leader calls and worker registration are idempotent.
* The store's clock is the server's ``TIME``, read inside the script, unless the caller
  passes an explicit ``now`` (scripts receive ``''`` for "none").
* Indexes are sorted sets, so the hot paths are range reads, O(batch * log n): no KEYS/SCAN.
* Scripts are registered with redis-py's ``register_script``: after a server restart or
  ``SCRIPT FLUSH`` the first EVALSHA gets NOSCRIPT and redis-py reloads the script.

Key layout (``P`` is the prefix, default ``tether``, from ``?prefix=`` in the URL); nothing is
written outside ``P:``::

    P:schema_version              string   1 (SET NX by migrate)
    P:epoch                       string   random, made by migrate: gone = data lost (_watch)
    P:incidents                   hash     run_id, restarts_seen, data_loss, last_*_at
    P:ids                         string   INCR counter of job ids
    P:job:{id}                    hash     every field of JobRecord (absent = None), plus
                                           lease_owner (the owner of lease_token)
    P:queues                      set      every queue name ever enqueued to
    P:prios:{queue}               zset     priority levels with pending jobs (score = member)
    P:pending:{queue}:{priority}  zset     pending jobs, score run_at, member id zero-padded
                                           to 16 digits (equal run_at tie-breaks by id)
    P:running                     zset     running jobs, score lease_until (the reaper range)
    P:idx:{queue}:{status}        zset     job ids by status, score id (list_jobs, counts)
    P:finished:{status}           zset     terminal jobs, score finished_at (prune range)
    P:unique                      hash     unique_key -> id of its live (non-terminal) job
    P:req:{call}:{request id}     string   a call's reply, for its replays (expires: PX)
    P:workers                     hash     worker id -> JSON {host, pid, queues, concurrency,
                                           started_at}
    P:workers:seen                zset     worker id, score last_seen
    P:leader:{name}               hash     holder, term, expires_at
    P:leader_term:{name}          string   INCR counter: the term survives expiry/release
    P:wake                        channel  pub/sub wake-ups: newline-separated queue names
    P:done                        channel  ids that became terminal, comma-separated (finish,
                                           cancel, reap publish; wait_for_finish listens)
    P:schedule:{name}             hash     last_tick, last_job_id, updated_at (schedules.py)
    P:schedules                   set      every schedule name with a recorded tick

The scripts build key names from the prefix instead of declaring them in KEYS, so this store
needs a standalone Redis (or a single-shard deployment), not Redis Cluster.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Sequence
from typing import Any, cast

from tether import _limits as limits
from tether._errors import JobNotFound, SchemaError, StoreError, StoreUnavailable
from tether.stores._contract import (
    REAPED_ERROR,
    CancelResult,
    HeartbeatResult,
    JobRecord,
    JobStatus,
    Leadership,
    Lease,
    NewJob,
    Outcome,
    Reaped,
    RetryResult,
    StoreInfo,
)
from tether.stores._redis import rows as codec
from tether.stores._redis import url as _url
from tether.stores._redis.admin import Inspection
from tether.stores._redis.aio import AsyncMixin
from tether.stores._redis.calls import CANCEL as _CANCEL
from tether.stores._redis.calls import request as _request
from tether.stores._redis.calls import script_text as _script_text
from tether.stores._redis.connection import connect, io
from tether.stores._redis.ops import OpsMixin
from tether.stores._redis.schedules import SchedulesMixin
from tether.stores._redis.waker import Waker
from tether.stores._redis.watch import ServerWatch

SCHEMA_VERSION = 1
DEFAULT_PREFIX = _url.DEFAULT_PREFIX
_SCRIPTS = (
    "enqueue", "claim", "heartbeat", "finish", "reap", "cancel", "retry_failed",
    "fenced_write", "prune", "leader_acquire", "leader_renew", "leader_release",
    "worker_register", "worker_unregister", "list_jobs", "counts", "observe",
)  # fmt: skip
_KINDS = frozenset({"done", "error", "dead", "cancelled", "released", "stalled"})
#: A claim's record lives at least this long, and at least two lease TTLs (a replay after the
#: leases expired finds nothing running under them anyway).
MIN_CLAIM_RECORD_MS = 60 * 1000


class RedisStore(SchedulesMixin, AsyncMixin, Inspection, OpsMixin):
    """A tether store on a standalone Redis >= 5 (or Valkey); see the module docstring."""

    kind = "redis"

    def __init__(self, url: str, *, prefix: str | None = None, **options: Any) -> None:
        checked = _url.parse(url, prefix)
        self.prefix = checked.prefix
        self._url = checked.shown
        self._client = connect(checked.client_url, options)
        self._client_url, self._options = checked.client_url, options  # the async producer's
        self._scripts = {n: self._client.register_script(_script_text(n)) for n in _SCRIPTS}
        self._watch = ServerWatch(f"{self._url} prefix {self.prefix!r}")
        # A lost subscription means the server went away: look for a restart at once after.
        self._waker = Waker(self._client, f"{self.prefix}:wake", self._watch.soon,
                            done_channel=f"{self.prefix}:done")
        self._marks = threading.local()  # per thread: wake-up mark taken before its claim

    @property
    def check_interval(self) -> float:
        """Seconds between looks for a server restart / data loss on claim and heartbeat."""
        return self._watch.interval

    @check_interval.setter
    def check_interval(self, seconds: float) -> None:
        self._watch.interval = seconds

    def _run(self, name: str, *args: Any) -> Any:
        try:
            with io():
                return self._scripts[name](args=[self.prefix, *args])
        except StoreUnavailable:
            self._watch.soon()  # the server may be restarting: look as soon as it answers
            raise

    def _key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def _observe(self, *, create: bool = False) -> None:
        """Look for a restart or data loss (see _watch.py); never fails the caller's call."""
        epoch, run_id = self._watch.known()
        fresh = secrets.token_hex(16)
        flag = "1" if create else "0"
        try:
            reply = self._run("observe", epoch, run_id, fresh, flag, str(SCHEMA_VERSION))
        except StoreError:
            if create:
                raise
            return
        self._watch.update(reply)

    def _observe_if_due(self) -> None:
        if self._watch.due():
            self._observe()

    # -- lifecycle ---------------------------------------------------------------------------
    def migrate(self) -> int:
        self._observe(create=True)  # detects a loss first, then creates what is missing
        self.check_schema()
        return self._schema_version()

    def _schema_version(self) -> int:
        with io():
            raw = self._client.get(self._key("schema_version"))
        if raw is None:
            raise SchemaError(f"no tether data under prefix {self.prefix!r}: run migrate first")
        try:
            return int(raw)
        except ValueError as exc:
            raise SchemaError(f"bad schema version {raw!r} under {self.prefix!r}") from exc

    def check_schema(self) -> None:
        version = self._schema_version()
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"redis prefix {self.prefix!r} has schema version {version}, this tether "
                f"knows up to {SCHEMA_VERSION}: upgrade tether"
            )

    def close(self) -> None:
        self._close_aio()
        self._waker.close()
        self._client.close()

    def info(self) -> StoreInfo:
        with io():
            pipe = self._client.pipeline(transaction=False)
            pipe.info("server")
            pipe.info("persistence")
            pipe.info("memory")
            pipe.get(self._key("schema_version"))
            pipe.hgetall(self._key("incidents"))
            server, persistence, memory, raw, incidents = pipe.execute()
        extra = {
            "prefix": self.prefix,
            "redis_version": str(server.get("redis_version", "?")),
            "run_id": str(server.get("run_id", "?")),
            "aof_enabled": str(persistence.get("aof_enabled", "?")),
            "maxmemory_policy": str(memory.get("maxmemory_policy", "?")),
            "restarts_seen": str(incidents.get("restarts_seen", "0")),
            "data_loss": str(incidents.get("data_loss", "0")),
        }
        for field in ("last_restart_at", "last_data_loss_at"):
            if field in incidents:
                extra[field] = str(incidents[field])
        return StoreInfo(self.kind, self._url, int(raw) if raw else 0, extra)

    def now(self) -> float:
        with io():
            seconds, micros = self._client.time()
        return int(seconds) + int(micros) / 1_000_000

    # -- producers ---------------------------------------------------------------------------
    def enqueue(
        self, jobs: Sequence[NewJob], *, now: float | None = None, request_id: str | None = None
    ) -> list[int]:
        limits.check_jobs(jobs)  # the whole batch, before any write
        if not jobs:
            return []
        rid, ttl = _request(request_id)
        ids = self._run("enqueue", codec.now_arg(now), rid, ttl, *codec.enqueue_args(jobs))
        return [int(i) for i in ids]

    def cancel(self, job_id: int, *, now: float | None = None) -> CancelResult:
        job_id = limits.check_job_id(job_id)
        rid, ttl = _request(None)
        code = int(self._run("cancel", codec.now_arg(now), rid, ttl, str(job_id)))
        if code == 0:
            raise JobNotFound(job_id)
        return _CANCEL[code]

    def retry_failed(
        self, job_ids: Sequence[int] | None, *, now: float | None = None
    ) -> RetryResult:
        ids = None if job_ids is None else [str(limits.check_job_id(i)) for i in job_ids]
        if ids == []:
            return RetryResult(0)
        rid, ttl = _request(None)
        which = ["1"] if ids is None else ["0", *ids]
        moved, conflicts = self._run("retry_failed", codec.now_arg(now), rid, ttl, *which)
        return RetryResult(int(moved), tuple(int(i) for i in conflicts))

    # -- the lease protocol ------------------------------------------------------------------
    def claim(
        self,
        owner: str,
        queues: Sequence[str],
        limit: int,
        lease_ttl: float,
        *,
        now: float | None = None,
        request_id: str | None = None,
    ) -> list[JobRecord]:
        wanted = list(dict.fromkeys(queues))
        if limit <= 0 or not wanted:
            return []
        self._observe_if_due()
        # Taken before the claim: a wake-up that arrives while an empty claim's reply is on
        # its way back still ends this thread's next wait_for_jobs at once.
        mark = self._waker.mark()
        self._marks.seq = None
        nonce = secrets.token_hex(16) if request_id is None else request_id
        if request_id is not None:
            limits.check_text(request_id, "request_id", limit=limits.MAX_NAME)
        record_ms = str(max(MIN_CLAIM_RECORD_MS, int(lease_ttl * 2000)))
        rows = self._run(
            "claim", codec.now_arg(now), owner, str(int(limit)), codec.num(lease_ttl), nonce,
            record_ms, *wanted,
        )  # fmt: skip
        self._marks.seq = mark
        return [codec.job_from_flat(row) for row in rows]

    def heartbeat(
        self,
        owner: str,
        leases: Sequence[Lease],
        lease_ttl: float,
        *,
        now: float | None = None,
    ) -> HeartbeatResult:
        self._observe_if_due()
        lost, cancel = self._run(
            "heartbeat",
            codec.now_arg(now),
            owner,
            codec.num(lease_ttl),
            *codec.lease_args(leases),
        )
        return HeartbeatResult(
            lost=frozenset(leases[int(i) - 1] for i in lost),
            cancel_requested=frozenset(leases[int(i) - 1] for i in cancel),
        )

    def finish(self, outcomes: Sequence[Outcome], *, now: float | None = None) -> list[Lease]:
        if not outcomes:
            return []
        for o in outcomes:  # the whole batch is checked before any write
            if o.kind not in _KINDS:
                raise ValueError(f"unknown outcome kind {o.kind!r}")
            if o.result is not None:
                limits.check_json_text(o.result, "result")
            limits.check_delay(o.retry_delay, "retry_delay")
        rejected = self._run("finish", codec.now_arg(now), *codec.finish_args(outcomes))
        return [outcomes[int(i) - 1].lease for i in rejected]

    def _fenced_write(self, lease: Lease, field: str, value: str) -> bool:
        limits.check_json_text(value, field)
        args = [*codec.lease_args([lease]), field, value]
        return bool(int(self._run("fenced_write", *args)))

    def save_checkpoint(self, lease: Lease, checkpoint: str, *, now: float | None = None) -> bool:
        return self._fenced_write(lease, "checkpoint", checkpoint)

    def set_progress(self, lease: Lease, progress: str, *, now: float | None = None) -> bool:
        return self._fenced_write(lease, "progress", progress)

    def reap_expired(
        self, stall_grace: float = 0.0, *, now: float | None = None, limit: int = 1000
    ) -> list[Reaped]:
        if limit <= 0:
            return []
        rows = self._run(
            "reap", codec.now_arg(now), codec.num(stall_grace), str(int(limit)), REAPED_ERROR
        )
        return [
            Reaped(int(r[0]), int(r[1]), str(r[2]), cast(JobStatus, r[3]), int(r[4])) for r in rows
        ]

    def next_lease_expiry(self) -> float | None:
        with io():
            first = self._client.zrange(self._key("running"), 0, 0, withscores=True)
        return float(first[0][1]) if first else None

    def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> bool:
        since: int | None = getattr(self._marks, "seq", None)
        self._marks.seq = None  # one claim, one wait
        if timeout <= 0:
            return False
        return self._waker.wait(queues, timeout, since)

    def notify(self, queues: Sequence[str]) -> None:
        names = list(dict.fromkeys(queues))
        if names:
            with io():
                self._client.publish(self._key("wake"), "\n".join(names))

    # -- maintenance -------------------------------------------------------------------------
    def housekeeping(self) -> str | None:
        """Sorted-set members are removed at once, so claims never walk past old ones:
        nothing to do."""
        return None

    def prune(
        self, status: JobStatus, older_than: float, *, now: float | None = None, limit: int = 1000
    ) -> int:
        if limit <= 0:
            return 0
        args = [codec.now_arg(now), status, codec.num(older_than), str(int(limit))]
        return int(self._run("prune", *args))

    @staticmethod
    def _leadership(name: str, row: Any) -> Leadership | None:
        if row is None:
            return None
        holder, term, expires = row
        return Leadership(name, str(holder), int(term), float(expires))

    def leader_get(self, name: str) -> Leadership | None:
        """A plain HMGET of the lease hash (deleted on release)."""
        with io():
            row = self._client.hmget(self._key("leader", name), "holder", "term", "expires_at")
        return None if row[0] is None else self._leadership(name, row)

    def leader_acquire(
        self, name: str, holder: str, ttl: float, *, now: float | None = None
    ) -> Leadership | None:
        row = self._run("leader_acquire", codec.now_arg(now), name, holder, codec.num(ttl))
        return self._leadership(name, row)

    def leader_renew(
        self, name: str, holder: str, term: int, ttl: float, *, now: float | None = None
    ) -> Leadership | None:
        args = [codec.now_arg(now), name, holder, str(int(term)), codec.num(ttl)]
        return self._leadership(name, self._run("leader_renew", *args))

    def leader_release(self, name: str, holder: str, term: int) -> bool:
        return bool(int(self._run("leader_release", name, holder, str(int(term)))))
