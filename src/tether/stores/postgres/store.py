"""The PostgreSQL store: production, many worker machines sharing one database.

How the contract's invariants hold here (the statements live in ``queries.sql``):

1. **The claim is the lease grant, in one statement.** A CTE picks due ``pending`` rows
   ``FOR UPDATE SKIP LOCKED`` in (priority, run_at, id) order from a partial index, and the
   same statement's ``UPDATE ... RETURNING`` sets ``running``, ``locked_by``, ``lease_until``
   and ``attempt + 1`` using the DATABASE's ``now()`` (unless a test passes ``now``). Row locks
   plus the UPDATE's re-check of ``status`` mean no (job, attempt) is ever granted twice.
2. **Every write about a claimed job is fenced** by ``(id, attempt, locked_by)`` and
   ``status = 'running'`` in its WHERE clause. Heartbeat and finish fence each row of a batch
   (parallel arrays + ``unnest``); what RETURNING leaves out was rejected.
3. **The reaper is one set-based UPDATE** over the partial ``lease_until`` index, bounded by a
   ``LIMIT ... FOR UPDATE SKIP LOCKED`` CTE, with the stall rule in a CASE. Two reapers end
   in the same state: the first write moves each row out of ``running``.
4. **The database clock decides.** Times are ``timestamptz``; epoch seconds exist only at the
   SQL boundary (``to_timestamp`` in, ``extract(epoch ...)`` out).

Transactional enqueue/finish (the outbox pattern): pass ``conn=`` to run inside a caller's
transaction without committing, or use :meth:`PostgresStore.transaction`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any, cast

from psycopg.pq import TransactionStatus

from tether.errors import ConfigError, JobNotFound
from tether.stores import queries as named
from tether.stores.base import (
    REAPED_ERROR,
    TERMINAL,
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
from tether.stores.postgres import migrate as migrations
from tether.stores.postgres.connect import Conn, Connector
from tether.stores.postgres.listen import Listener
from tether.stores.urls import redact

QUERIES = {**named.load("tether.stores.postgres", "queries.sql"),
           **named.load("tether.stores.postgres", "admin.sql")}
_KINDS = frozenset({"done", "error", "dead", "cancelled", "released", "stalled"})
Row = tuple[Any, ...]


class PostgresStore:
    """``postgresql://user@host:5432/db?schema=tether``. Thread-safe (a small pool).

    Options: ``min_size``/``max_size`` (pool, default 1/4), ``timeout`` (seconds to wait for a
    pooled connection), ``connect_timeout``, ``prepare_threshold`` (executions before psycopg
    prepares a statement server-side), ``application_name``, ``vacuum_threshold`` (dead row
    versions in the jobs table before ``housekeeping`` vacuums it).
    """

    kind = "postgres"

    def __init__(self, url: str, *, vacuum_threshold: int = 10_000, **options: Any) -> None:
        self.vacuum_threshold = vacuum_threshold
        self._connector = Connector(url, **options)
        self.url = url
        self.schema = self._connector.schema
        self.channel = self._connector.channel
        self.application_name = self._connector.application_name
        self._listener = Listener(self._connector)
        self._closed = False

    # -- plumbing ------------------------------------------------------------------------------
    def _rows(self, name: str, params: dict[str, Any], conn: Conn | None = None) -> list[Row]:
        if conn is not None:
            return self._in_caller(conn, name, params)
        with self._connector.connection() as pooled:
            return pooled.execute(QUERIES[name], params).fetchall()

    def _in_caller(self, conn: Conn, name: str, params: dict[str, Any]) -> list[Row]:
        """Run on the caller's connection, inside its transaction, never committing it.

        A connection of ours already has our search_path; a foreign one gets it for the
        duration of the statement only (transaction-local, then put back)."""
        with self._connector.connection(conn):
            if self._connector.owns(conn):
                return conn.execute(QUERIES[name], params).fetchall()
            idle = conn.info.transaction_status == TransactionStatus.IDLE
            block = conn.transaction() if conn.autocommit and idle else nullcontext()
            with block:
                conn.execute(QUERIES["push_search_path"], {"path": self._connector.search_path})
                rows = conn.execute(QUERIES[name], params).fetchall()
                conn.execute(QUERIES["pop_search_path"])
                return rows

    def _one(self, name: str, params: dict[str, Any]) -> Row | None:
        rows = self._rows(name, params)
        return rows[0] if rows else None

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        """A pool connection inside a transaction: commit on success, rollback on error.

        Pass it as ``conn=`` to :meth:`enqueue` / :meth:`finish` to make them part of the
        caller's own writes."""
        with self._connector.connection() as conn, conn.transaction():
            yield conn

    # -- lifecycle -----------------------------------------------------------------------------
    def migrate(self) -> int:
        with self._connector.connection() as conn:
            return migrations.migrate(conn, self.schema, QUERIES)

    def check_schema(self) -> None:
        with self._connector.connection() as conn:
            migrations.check(conn, self.schema, QUERIES)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._listener.close()
        self._connector.close()

    def info(self) -> StoreInfo:
        with self._connector.connection() as conn:
            version = migrations.current(conn, QUERIES)
            server = conn.info.server_version
        stats = self._connector.pool.get_stats()
        return StoreInfo(
            kind=self.kind,
            url=redact(self.url),
            schema_version=version,
            extra={
                "schema": self.schema,
                "server_version": f"{server // 10000}.{server % 10000}",
                "pool_size": str(stats.get("pool_size", 0)),
                "pool_max": str(self._connector.pool.max_size),
                "channel": self.channel,
                "application_name": self.application_name,
            },
        )

    def now(self) -> float:
        row = self._one("now", {})
        return float(row[0]) if row else 0.0

    # -- producers -----------------------------------------------------------------------------
    def enqueue(
        self, jobs: Sequence[NewJob], *, now: float | None = None, conn: Conn | None = None
    ) -> list[int]:
        if not jobs:
            return []
        if len(jobs) == 1 and jobs[0].unique_key is None:
            job = jobs[0]
            row = self._rows("enqueue_one", {
                "now": now, "channel": self.channel, "task": job.task, "payload": job.payload,
                "queue": job.queue, "priority": job.priority, "run_at": job.run_at,
                "delay": float(job.delay), "max_attempts": job.max_attempts,
                "max_stalls": job.max_stalls,
            }, conn)[0]
            return [int(row[0])]
        # Repeated unique_keys within the batch fold onto their first occurrence here, so the
        # statement's ON CONFLICT never meets the same key twice.
        first: dict[str, int] = {}
        sent: list[NewJob] = []
        slot: list[int] = []
        for job in jobs:
            if job.unique_key is not None and job.unique_key in first:
                slot.append(first[job.unique_key])
                continue
            if job.unique_key is not None:
                first[job.unique_key] = len(sent)
            slot.append(len(sent))
            sent.append(job)
        params = {
            "now": now,
            "channel": self.channel,
            "tasks": [j.task for j in sent],
            "payloads": [j.payload for j in sent],
            "queues": [j.queue for j in sent],
            "priorities": [j.priority for j in sent],
            "run_ats": [j.run_at for j in sent],
            "delays": [float(j.delay) for j in sent],
            "max_attempts": [j.max_attempts for j in sent],
            "max_stalls": [j.max_stalls for j in sent],
            "unique_keys": [j.unique_key for j in sent],
        }
        ids = [int(row[0]) for row in self._rows("enqueue", params, conn)]
        return [ids[i] for i in slot]

    def cancel(self, job_id: int, *, now: float | None = None) -> CancelResult:
        row = self._one("cancel", {"id": job_id, "now": now})
        if row is None:
            raise JobNotFound(job_id)
        return cast(CancelResult, row[0])

    def retry_failed(self, job_ids: Sequence[int] | None, *, now: float | None = None) -> int:
        if job_ids is None:
            row = self._one("retry_failed_all", {"now": now, "channel": self.channel})
        elif not job_ids:
            return 0
        else:
            params = {"ids": list(job_ids), "now": now, "channel": self.channel}
            row = self._one("retry_failed_ids", params)
        return int(row[0]) if row else 0

    # -- the lease protocol ----------------------------------------------------------------------
    def claim(
        self,
        owner: str,
        queues: Sequence[str],
        limit: int,
        lease_ttl: float,
        *,
        now: float | None = None,
    ) -> list[Job]:
        if limit <= 0 or not queues:
            return []
        params: dict[str, Any] = {"owner": owner, "limit": limit, "ttl": lease_ttl, "now": now}
        if len(set(queues)) == 1:
            params["queue"] = queues[0]
            rows = self._rows("claim", params)
        else:
            params["queues"] = list(queues)
            rows = self._rows("claim_queues", params)
        return [Job(*row) for row in rows]

    def heartbeat(
        self,
        owner: str,
        leases: Sequence[Lease],
        lease_ttl: float,
        *,
        now: float | None = None,
    ) -> HeartbeatResult:
        # Sorted by id so concurrent batch writes touching the same rows lock them in one order.
        ordered = sorted(set(leases), key=lambda lease: (lease.job_id, lease.attempt))
        params = {
            "worker": owner,
            "ids": [lease.job_id for lease in ordered],
            "attempts": [lease.attempt for lease in ordered],
            "owners": [lease.owner for lease in ordered],
            "ttl": lease_ttl,
            "now": now,
        }
        held: set[Lease] = set()
        cancel: set[Lease] = set()
        for job_id, attempt, locked_by, cancel_requested in self._rows("heartbeat", params):
            lease = Lease(int(job_id), int(attempt), str(locked_by))
            held.add(lease)
            if cancel_requested:
                cancel.add(lease)
        return HeartbeatResult(
            lost=frozenset(set(ordered) - held), cancel_requested=frozenset(cancel)
        )

    def finish(
        self, outcomes: Sequence[Outcome], *, now: float | None = None, conn: Conn | None = None
    ) -> list[Lease]:
        batch: dict[int, Outcome] = {}
        for outcome in outcomes:
            if outcome.kind not in _KINDS:
                raise ConfigError(f"unknown outcome kind {outcome.kind!r}")
            batch.setdefault(outcome.lease.job_id, outcome)  # one per job: the first counts
        if not batch:
            return []
        ordered = [batch[job_id] for job_id in sorted(batch)]
        batch_json = json.dumps([
            {"id": o.lease.job_id, "attempt": o.lease.attempt, "owner": o.lease.owner,
             "kind": o.kind, "result": o.result, "error": o.error, "reason": _reason(o),
             "retry_delay": float(o.retry_delay)}
            for o in ordered
        ])
        # ids as an array literal built from ints: no per-element work in psycopg's dumper.
        ids_literal = "{" + ",".join(str(o.lease.job_id) for o in ordered) + "}"
        params = {"now": now, "batch": batch_json, "ids": ids_literal}
        accepted = {Lease(int(i), int(a), str(w)) for i, a, w in self._rows("finish", params, conn)}
        return list(dict.fromkeys(o.lease for o in outcomes if o.lease not in accepted))

    def save_checkpoint(self, lease: Lease, checkpoint: str, *, now: float | None = None) -> bool:
        return self._fenced("save_checkpoint", lease, checkpoint)

    def set_progress(self, lease: Lease, progress: str, *, now: float | None = None) -> bool:
        return self._fenced("set_progress", lease, progress)

    def _fenced(self, name: str, lease: Lease, value: str) -> bool:
        params = {"id": lease.job_id, "attempt": lease.attempt, "owner": lease.owner}
        return self._one(name, {**params, "value": value}) is not None

    def reap_expired(
        self, stall_grace: float = 0.0, *, now: float | None = None, limit: int = 1000
    ) -> list[Reaped]:
        if limit <= 0:
            return []
        params = {"grace": stall_grace, "now": now, "limit": limit, "error": REAPED_ERROR,
                  "channel": self.channel}
        return [
            Reaped(int(i), int(a), str(o), cast(JobStatus, s), int(n))
            for i, a, o, s, n in self._rows("reap_expired", params)
        ]

    def next_lease_expiry(self) -> float | None:
        row = self._one("next_lease_expiry", {})
        return None if row is None or row[0] is None else float(row[0])

    def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> bool:
        return self._listener.wait(queues, timeout)

    def notify(self, queues: Sequence[str]) -> None:
        if queues:
            self._rows("notify", {"channel": self.channel, "queues": sorted(set(queues))})

    # -- maintenance ---------------------------------------------------------------------------
    def housekeeping(self) -> str | None:
        row = self._one("dead_tuples", {})
        dead = int(row[0]) if row else 0
        if dead < self.vacuum_threshold:
            return None
        with self._connector.connection() as pooled:
            pooled.execute(QUERIES["vacuum_jobs"])
        return f"vacuumed jobs ({dead} dead row versions)"

    def prune(
        self, status: JobStatus, older_than: float, *, now: float | None = None, limit: int = 1000
    ) -> int:
        if status not in TERMINAL:
            raise ConfigError(f"prune only deletes finished jobs, not {status!r} ones")
        if limit <= 0:
            return 0
        params = {"status": status, "older_than": older_than, "now": now, "limit": limit}
        with self._connector.connection() as conn:
            return conn.execute(QUERIES["prune"], params).rowcount

    def leader_acquire(
        self, name: str, holder: str, ttl: float, *, now: float | None = None
    ) -> Leadership | None:
        row = self._one("leader_acquire", {"name": name, "holder": holder, "ttl": ttl, "now": now})
        return _leadership(row)

    def leader_renew(
        self, name: str, holder: str, term: int, ttl: float, *, now: float | None = None
    ) -> Leadership | None:
        params = {"name": name, "holder": holder, "term": term, "ttl": ttl, "now": now}
        return _leadership(self._one("leader_renew", params))

    def leader_release(self, name: str, holder: str, term: int) -> bool:
        row = self._one("leader_release", {"name": name, "holder": holder, "term": term})
        return row is not None

    # -- inspection ----------------------------------------------------------------------------
    def get_job(self, job_id: int) -> Job | None:
        row = self._one("get_job", {"id": job_id})
        return None if row is None else Job(*row)

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
        params = {"status": status, "queue": queue, "after_id": after_id, "limit": limit}
        return [Job(*row) for row in self._rows("list_jobs", params)]

    def counts(self) -> list[QueueCount]:
        return [QueueCount(q, cast(JobStatus, s), int(n)) for q, s, n in self._rows("counts", {})]

    def register_worker(self, worker: WorkerInfo, *, now: float | None = None) -> None:
        params = {
            "id": worker.id,
            "host": worker.host,
            "pid": worker.pid,
            "queues": list(worker.queues),
            "concurrency": worker.concurrency,
            "now": now,
        }
        self._rows("register_worker", params)

    def unregister_worker(self, worker_id: str) -> None:
        self._rows("unregister_worker", {"id": worker_id})

    def list_workers(self) -> list[WorkerInfo]:
        return [
            WorkerInfo(str(i), str(h), int(p), tuple(q), int(c), float(s), float(seen))
            for i, h, p, q, c, s, seen in self._rows("list_workers", {})
        ]


def _reason(outcome: Outcome) -> str | None:
    """The failure reason recorded for an outcome; errors and dead-letters default to error,
    stalls to stalled."""
    if outcome.reason is None and outcome.kind in ("error", "dead"):
        return "error"
    if outcome.reason is None and outcome.kind == "stalled":
        return "stalled"
    return outcome.reason


def _leadership(row: Row | None) -> Leadership | None:
    if row is None:
        return None
    name, holder, term, expires_at = row
    return Leadership(str(name), str(holder), int(term), float(expires_at))


__all__ = ["QUERIES", "PostgresStore"]
