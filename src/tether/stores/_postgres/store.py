"""The PostgreSQL store: production, many worker machines sharing one database.

How the contract's invariants hold here (the statements live in ``queries.sql``,
``producers.sql`` and ``admin.sql``):

1. **The claim is the lease grant, in one statement.** A CTE picks due ``pending`` rows
   ``FOR UPDATE SKIP LOCKED`` in (priority, run_at, id) order from a partial index, and the
   same statement's ``UPDATE ... RETURNING`` sets ``running``, ``locked_by``, ``lease_until``,
   ``attempt + 1`` and ``lease_token = nonce:id`` using the database's clock (unless a test
   passes ``now``). Row locks plus the UPDATE's re-check of ``status`` mean no (job, attempt)
   is ever granted twice.
2. **Every write about a claimed job is fenced** by ``(id, attempt, locked_by, lease_token)``
   and ``status = 'running'`` in its WHERE clause. Heartbeat and finish fence each row of a
   batch; what RETURNING leaves out was rejected (finish: unless it is a replay of an outcome
   the same claim already applied, which the kept token recognises).
3. **The reaper is one set-based UPDATE** over the partial ``lease_until`` index, bounded by a
   ``LIMIT ... FOR UPDATE SKIP LOCKED`` CTE, with the stall rule in a CASE.
4. **The database clock decides** (``statement_timestamp()``). Times are ``timestamptz``;
   epoch seconds exist only at the SQL boundary.

Every call is safe to retry: enqueue and claim take a ``request_id`` that a repeat is answered
from, finish recognises its own applied outcomes, heartbeat and renew are idempotent, and a
holder's repeated ``leader_acquire`` gets its leadership back. psycopg itself never replays.
No driver exception leaves a method (``driver_errors``); no method waits on a producer's
open transaction (enqueue locks no job row).

Transactional enqueue/finish (the outbox pattern): pass ``conn=`` to run inside a caller's
transaction without committing, or use :meth:`PostgresStore.transaction`.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Sequence
from typing import Any, cast

from tether import _limits as limits
from tether._errors import ConfigError, JobNotFound
from tether._text import clean_error
from tether.stores._contract import (
    REAPED_ERROR,
    CancelResult,
    HeartbeatResult,
    JobRecord,
    JobStatus,
    Lease,
    NewJob,
    Outcome,
    Reaped,
    RetryResult,
    StoreInfo,
)
from tether.stores._postgres import schema as migrations
from tether.stores._postgres import statements
from tether.stores._postgres.admin import REQUEST_TTL, Admin
from tether.stores._postgres.aio import AsyncMixin
from tether.stores._postgres.connection import Conn
from tether.stores._postgres.enqueue_call import enqueue_call, ids_of
from tether.stores._postgres.listen import Listener
from tether.stores._postgres.ops import OpsMixin
from tether.stores._postgres.plumbing import race
from tether.stores._postgres.schedules import SchedulesMixin
from tether.stores._records import job_of
from tether.stores._urls import redact

#: The statement templates ({schema} unformatted); each store formats its own set.
QUERIES = statements.TEMPLATES
_KINDS = frozenset({"done", "error", "dead", "cancelled", "released", "stalled"})
_REASON = {"error": "error", "dead": "error", "released": "released",
           "cancelled": "cancelled", "done": "done", "stalled": "stalled"}


class PostgresStore(SchedulesMixin, AsyncMixin, OpsMixin, Admin):
    """``postgresql://user@host:5432/db?schema=tether``. Thread-safe (a small pool).

    Options: ``min_size``/``max_size`` (pool, default 1/4), ``timeout`` (seconds to wait for a
    free pooled connection), ``connect_timeout``, ``prepare_threshold`` (executions before
    psycopg prepares a statement server-side), ``application_name``, ``vacuum_threshold``
    (dead row versions in the jobs table before ``housekeeping`` vacuums it).
    """

    kind = "postgres"

    def __init__(self, url: str, *, vacuum_threshold: int = 10_000, **options: Any) -> None:
        super().__init__(url, **options)
        self.vacuum_threshold = vacuum_threshold
        self._listener = Listener(self._connector)
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------------
    def migrate(self) -> int:
        with self._connector.connection() as conn:
            return migrations.migrate(conn, self.schema, self.queries)

    def check_schema(self) -> None:
        with self._connector.connection() as conn:
            migrations.check(conn, self.schema, self.queries)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_aio()
        self._listener.close()
        self._connector.close()

    def info(self) -> StoreInfo:
        with self._connector.connection() as conn:
            version = migrations.current(conn, self.queries)
            server = conn.info.server_version
        stats = self._connector.pool.stats()
        return StoreInfo(
            kind=self.kind,
            url=redact(self.url),
            schema_version=version,
            extra={
                "schema": self.schema,
                "server_version": f"{server // 10000}.{server % 10000}",
                "pool_size": str(stats["pool_size"]),
                "pool_max": str(stats["pool_max"]),
                "channel": self.channel,
                "application_name": self.application_name,
            },
        )

    def now(self) -> float:
        row = self._one("now", {})
        return float(row[0]) if row else 0.0

    # -- producers -----------------------------------------------------------------------------
    def enqueue(
        self,
        jobs: Sequence[NewJob],
        *,
        now: float | None = None,
        request_id: str | None = None,
        conn: Conn | None = None,
    ) -> list[int]:
        call = enqueue_call(jobs, now=now, channel=self.channel, request_id=request_id,
                            jobs_key=self._connector.jobs_key, gate=conn is None)
        if call is None:
            return []
        return ids_of(call, self._retrying(call.name, call.params, conn, race))

    def cancel(self, job_id: int, *, now: float | None = None) -> CancelResult:
        limits.check_job_id(job_id)
        row = self._one("cancel", {"id": job_id, "now": now, "done": self.done_channel})
        if row is None:
            raise JobNotFound(job_id)
        return cast(CancelResult, row[0])

    def retry_failed(
        self, job_ids: Sequence[int] | None, *, now: float | None = None
    ) -> RetryResult:
        params: dict[str, Any] = {"now": now, "channel": self.channel}
        if job_ids is None:
            name = "retry_failed_all"
        else:
            ids = [limits.check_job_id(job_id) for job_id in job_ids]
            if not ids:
                return RetryResult(0)
            name, params["ids"] = "retry_failed_ids", ids
        [(retried, conflicts, _)] = self._retrying(name, params, None, race)
        return RetryResult(int(retried), tuple(int(i) for i in conflicts))

    # -- the lease protocol ----------------------------------------------------------------------
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
        if limit <= 0 or not queues:
            return []
        nonce = secrets.token_hex(16) if request_id is None else request_id
        params: dict[str, Any] = {"owner": owner, "limit": limit, "ttl": lease_ttl, "now": now,
                                  "nonce": nonce}
        if len(set(queues)) == 1:
            params["queue"] = queues[0]
            rows = self._rows("claim", params)
        else:
            params["queues"] = list(queues)
            rows = self._rows("claim_queues", params)
        return [job_of(row) for row in rows]

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
            "tokens": [lease.token for lease in ordered],
            "ttl": lease_ttl,
            "now": now,
        }
        held: set[Lease] = set()
        cancel: set[Lease] = set()
        for job_id, attempt, locked_by, token, cancel_requested in self._rows("heartbeat", params):
            lease = Lease(int(job_id), int(attempt), str(locked_by), str(token))
            held.add(lease)
            if cancel_requested:
                cancel.add(lease)
        return HeartbeatResult(
            lost=frozenset(set(ordered) - held), cancel_requested=frozenset(cancel)
        )

    def finish(
        self, outcomes: Sequence[Outcome], *, now: float | None = None, conn: Conn | None = None
    ) -> list[Lease]:
        # The whole batch is checked before anything is written.
        batch: dict[Lease, Outcome] = {}
        for outcome in outcomes:
            if outcome.kind not in _KINDS:
                raise ConfigError(f"unknown outcome kind {outcome.kind!r}")
            if outcome.result is not None:
                limits.check_json_text(outcome.result, "result")
            # One outcome per lease: an exact repeat counts once and shares its fate. Distinct
            # leases of one job are all sent, each fenced on its own.
            batch.setdefault(outcome.lease, outcome)
        if not batch:
            return []
        ordered = sorted(batch.values(), key=lambda o: (o.lease.job_id, o.lease.attempt))
        batch_json = json.dumps([
            {"id": o.lease.job_id, "attempt": o.lease.attempt, "owner": o.lease.owner,
             "token": o.lease.token, "kind": o.kind, "result": o.result,
             "error": None if o.error is None else clean_error(o.error),
             "reason": o.reason or _REASON[o.kind], "retry_delay": float(o.retry_delay),
             "digest": _digest(o)}
            for o in ordered
        ])
        # ids as an array literal built from ints: no per-element work in psycopg's dumper.
        ids_literal = "{" + ",".join(str(o.lease.job_id) for o in ordered) + "}"
        params = {"now": now, "batch": batch_json, "ids": ids_literal, "done": self.done_channel,
                  "done_key": self.done_key, "gate": conn is None}
        accepted = _leases(self._rows("finish", params, conn))
        missed = [o for o in ordered if o.lease not in accepted]
        if missed:  # a lost lease, or a replay of an outcome whose reply was lost
            accepted |= _leases(self._rows("finish_replays", {
                "batch": json.dumps([{"id": o.lease.job_id, "attempt": o.lease.attempt,
                                      "owner": o.lease.owner, "token": o.lease.token,
                                      "digest": _digest(o)} for o in missed]),
                "ids": "{" + ",".join(str(o.lease.job_id) for o in missed) + "}",
            }, conn))
        return list(dict.fromkeys(o.lease for o in outcomes if o.lease not in accepted))

    def save_checkpoint(self, lease: Lease, checkpoint: str, *, now: float | None = None) -> bool:
        return self._fenced("save_checkpoint", lease,
                            limits.check_json_text(checkpoint, "checkpoint"))

    def set_progress(self, lease: Lease, progress: str, *, now: float | None = None) -> bool:
        return self._fenced("set_progress", lease, limits.check_json_text(progress, "progress"))

    def _fenced(self, name: str, lease: Lease, value: str) -> bool:
        params = {"id": lease.job_id, "attempt": lease.attempt, "owner": lease.owner,
                  "token": lease.token, "value": value}
        return self._one(name, params) is not None

    def reap_expired(
        self, stall_grace: float = 0.0, *, now: float | None = None, limit: int = 1000
    ) -> list[Reaped]:
        if limit <= 0:
            return []
        params = {"grace": stall_grace, "now": now, "limit": limit, "error": REAPED_ERROR,
                  "channel": self.channel, "done": self.done_channel}
        return [
            Reaped(int(i), int(a), str(o), cast(JobStatus, s), int(n))
            for i, a, o, s, n in self._rows("reap_expired", params)
        ]

    def next_lease_expiry(self) -> float | None:
        row = self._one("next_lease_expiry", {})
        return None if row is None or row[0] is None else float(row[0])

    def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> bool:
        """Never raises: the listening connection reconnects in the background, and its
        return after an outage counts as a wake-up."""
        return self._listener.wait(queues, timeout)

    def notify(self, queues: Sequence[str]) -> None:
        if queues:
            self._rows("notify", {"channel": self.channel, "queues": sorted(set(queues))})

def _leases(rows: list[tuple[Any, ...]]) -> set[Lease]:
    return {Lease(int(i), int(a), str(w), str(t)) for i, a, w, t in rows}


def _digest(outcome: Outcome) -> str:
    """What identifies an outcome beyond its job, attempt and token (the owner included), so
    that only an exact replay of an applied outcome is accepted (128 bits; blake2b is cheap
    next to the round trip)."""
    text = json.dumps([outcome.lease.owner, outcome.kind, outcome.result, outcome.error,
                       outcome.reason, float(outcome.retry_delay)])
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()



__all__ = ["QUERIES", "REQUEST_TTL", "PostgresStore"]
