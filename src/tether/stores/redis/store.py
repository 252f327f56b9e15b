"""The Redis store: every multi-key step is one Lua script, run with EVALSHA.

Invariants (those of :mod:`tether.stores.base`, kept the Redis way):

* Each state change of a job (enqueue, claim, heartbeat, finish, reap, cancel, retry_failed,
  checkpoint/progress, prune) is ONE script over a whole batch, so Redis' single-threaded
  script execution makes it atomic: no client ever sees a job half-moved between indexes, and
  two claimers can never take the same (job, attempt).
* Every write about a running job is fenced inside its script by (id, attempt, owner) and
  ``status == 'running'``.
* The store's clock is the server's ``TIME``, read inside the script, unless the caller
  passes an explicit ``now`` (scripts receive ``''`` for "none").
* Indexes are sorted sets, so the hot paths are range reads, O(batch * log n): no KEYS/SCAN.
* Scripts are registered with redis-py's ``register_script``: after a server restart or
  ``SCRIPT FLUSH`` the first EVALSHA gets NOSCRIPT and redis-py reloads the script.

Key layout (``P`` is the prefix, default ``tether``, from ``?prefix=`` in the URL); nothing is
written outside ``P:``::

    P:schema_version              string   1 (SET NX by migrate)
    P:ids                         string   INCR counter of job ids
    P:job:{id}                    hash     every field of base.Job; absent field = None
    P:queues                      set      every queue name ever enqueued to
    P:prios:{queue}               zset     priority levels with pending jobs (score = member)
    P:pending:{queue}:{priority}  zset     pending jobs, score run_at, member id zero-padded
                                           to 16 digits (equal run_at tie-breaks by id)
    P:running                     zset     running jobs, score lease_until (the reaper range)
    P:idx:{queue}:{status}        zset     job ids by status, score id (list_jobs, counts)
    P:finished:{status}           zset     terminal jobs, score finished_at (prune range)
    P:unique                      hash     unique_key -> id of its live (non-terminal) job
    P:workers                     hash     worker id -> JSON {host, pid, queues, concurrency,
                                           started_at}
    P:workers:seen                zset     worker id, score last_seen
    P:leader:{name}               hash     holder, term, expires_at
    P:leader_term:{name}          string   INCR counter: the term survives expiry/release
    P:wake                        channel  pub/sub wake-ups: newline-separated queue names

The scripts build key names from the prefix instead of declaring them in KEYS, so this store
needs a standalone Redis (or a single-shard deployment), not Redis Cluster.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from typing import Any, cast

from tether.errors import (
    ConfigError,
    JobNotFound,
    SchemaError,
)
from tether.stores import queries
from tether.stores.base import (
    REAPED_ERROR,
    CancelResult,
    HeartbeatResult,
    Job,
    JobStatus,
    Leadership,
    Lease,
    NewJob,
    Outcome,
    QueueCount,
    Reaped,
    StoreInfo,
    WorkerInfo,
)
from tether.stores.redis import _codec as codec
from tether.stores.redis._conn import connect, io, split_url
from tether.stores.redis._waker import Waker
from tether.stores.urls import redact

SCHEMA_VERSION = 1
DEFAULT_PREFIX = "tether"
_SCRIPTS = (
    "enqueue", "claim", "heartbeat", "finish", "reap", "cancel", "retry_failed",
    "fenced_write", "prune", "leader_acquire", "leader_renew", "leader_release",
    "worker_register", "worker_unregister", "list_jobs", "counts",
)  # fmt: skip
_KINDS = frozenset({"done", "error", "dead", "cancelled", "released", "stalled"})
_CANCEL: dict[int, CancelResult] = {1: "cancelled", 2: "requested", 3: "finished"}


@cache
def _script_text(name: str) -> str:
    pkg = "tether.stores.redis"
    return queries.read(pkg, "_lib.lua") + "\n" + queries.read(pkg, f"{name}.lua")


class RedisStore:
    """A tether store on a standalone Redis >= 5 (or Valkey); see the module docstring."""

    kind = "redis"

    def __init__(self, url: str, *, prefix: str | None = None, **options: Any) -> None:
        client_url, url_prefix = split_url(url)
        self.prefix = prefix or url_prefix or DEFAULT_PREFIX
        if any(c.isspace() for c in self.prefix) or "*" in self.prefix:
            raise ConfigError(f"invalid redis key prefix {self.prefix!r}")
        self._url = redact(client_url)
        self._client = connect(client_url, options)
        self._scripts = {n: self._client.register_script(_script_text(n)) for n in _SCRIPTS}
        self._waker = Waker(self._client, f"{self.prefix}:wake")

    def _run(self, name: str, *args: Any) -> Any:
        with io():
            return self._scripts[name](args=[self.prefix, *args])

    def _key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    # -- lifecycle ---------------------------------------------------------------------------
    def migrate(self) -> int:
        key = self._key("schema_version")
        with io():
            self._client.set(key, SCHEMA_VERSION, nx=True)
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
        self._waker.close()
        self._client.close()

    def info(self) -> StoreInfo:
        with io():
            server = self._client.info("server")
            persistence = self._client.info("persistence")
            memory = self._client.info("memory")
            raw = self._client.get(self._key("schema_version"))
        extra = {
            "prefix": self.prefix,
            "redis_version": str(server.get("redis_version", "?")),
            "aof_enabled": str(persistence.get("aof_enabled", "?")),
            "maxmemory_policy": str(memory.get("maxmemory_policy", "?")),
        }
        return StoreInfo(self.kind, self._url, int(raw) if raw else 0, extra)

    def now(self) -> float:
        with io():
            seconds, micros = self._client.time()
        return int(seconds) + int(micros) / 1_000_000

    # -- producers ---------------------------------------------------------------------------
    def enqueue(self, jobs: Sequence[NewJob], *, now: float | None = None) -> list[int]:
        if not jobs:
            return []
        ids = self._run("enqueue", codec.now_arg(now), *codec.enqueue_args(jobs))
        return [int(i) for i in ids]

    def cancel(self, job_id: int, *, now: float | None = None) -> CancelResult:
        code = int(self._run("cancel", codec.now_arg(now), str(int(job_id))))
        if code == 0:
            raise JobNotFound(job_id)
        return _CANCEL[code]

    def retry_failed(self, job_ids: Sequence[int] | None, *, now: float | None = None) -> int:
        if job_ids is None:
            return int(self._run("retry_failed", codec.now_arg(now), "1"))
        if not job_ids:
            return 0
        ids = [str(int(i)) for i in job_ids]
        return int(self._run("retry_failed", codec.now_arg(now), "0", *ids))

    # -- the lease protocol ------------------------------------------------------------------
    def claim(
        self,
        owner: str,
        queues: Sequence[str],
        limit: int,
        lease_ttl: float,
        *,
        now: float | None = None,
    ) -> list[Job]:
        wanted = list(dict.fromkeys(queues))
        if limit <= 0 or not wanted:
            return []
        rows = self._run(
            "claim", codec.now_arg(now), owner, str(int(limit)), codec.num(lease_ttl), *wanted
        )
        return [codec.job_from_flat(row) for row in rows]

    def heartbeat(
        self,
        owner: str,
        leases: Sequence[Lease],
        lease_ttl: float,
        *,
        now: float | None = None,
    ) -> HeartbeatResult:
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
        for o in outcomes:
            if o.kind not in _KINDS:
                raise ValueError(f"unknown outcome kind {o.kind!r}")
        rejected = self._run("finish", codec.now_arg(now), *codec.finish_args(outcomes))
        return [outcomes[int(i) - 1].lease for i in rejected]

    def _fenced_write(self, lease: Lease, field: str, value: str) -> bool:
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
        if timeout <= 0:
            return False
        return self._waker.wait(queues, timeout)

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

    # -- inspection --------------------------------------------------------------------------
    def get_job(self, job_id: int) -> Job | None:
        with io():
            row = self._client.hgetall(self._key("job", str(int(job_id))))
        return codec.job_from_dict(cast(dict[str, str], row)) if row else None

    def list_jobs(
        self,
        *,
        status: JobStatus | None = None,
        queue: str | None = None,
        after_id: int | None = None,
        limit: int = 100,
    ) -> list[Job]:
        if limit <= 0:
            return []
        after = str(int(after_id)) if after_id is not None else "-inf"
        rows = self._run("list_jobs", status or "", queue or "", after, str(int(limit)))
        return [codec.job_from_flat(row) for row in rows]

    def counts(self) -> list[QueueCount]:
        flat = self._run("counts")
        return [
            QueueCount(str(flat[i]), cast(JobStatus, flat[i + 1]), int(flat[i + 2]))
            for i in range(0, len(flat), 3)
        ]

    def register_worker(self, worker: WorkerInfo, *, now: float | None = None) -> None:
        info = {
            "host": worker.host,
            "pid": worker.pid,
            "queues": list(worker.queues),
            "concurrency": worker.concurrency,
        }
        self._run("worker_register", codec.now_arg(now), worker.id, json.dumps(info))

    def unregister_worker(self, worker_id: str) -> None:
        self._run("worker_unregister", worker_id)

    def list_workers(self) -> list[WorkerInfo]:
        with io():
            pipe = self._client.pipeline(transaction=True)
            pipe.hgetall(self._key("workers"))
            pipe.zrange(self._key("workers:seen"), 0, -1, withscores=True)
            rows, seen = pipe.execute()
        last_seen = {str(member): float(score) for member, score in seen}
        workers = []
        for worker_id, text in sorted(rows.items()):
            d = json.loads(text)
            workers.append(
                WorkerInfo(
                    id=worker_id,
                    host=str(d["host"]),
                    pid=int(d["pid"]),
                    queues=tuple(str(q) for q in d["queues"]),
                    concurrency=int(d["concurrency"]),
                    started_at=float(d["started_at"]),
                    last_seen=last_seen.get(worker_id, float(d["started_at"])),
                )
            )
        return workers
