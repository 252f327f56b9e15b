"""The SQLite store: tether's embedded default, for one machine and many worker processes.

Invariants this module holds (see ``tether.stores._contract`` for the contract):

* **The claim is the lease grant, in one write.** ``claim`` is a single
  ``UPDATE ... WHERE id IN (SELECT ... LIMIT n) RETURNING`` inside ``BEGIN IMMEDIATE``: the rows
  become ``running`` with owner, lease, ``attempt + 1`` and ``started_at`` together. The write
  lock serialises claimers (threads and processes), so no two receive the same (job, attempt).
* **Every write about a claimed job is fenced** by ``(id, attempt, locked_by, lease_token)``
  *and* ``status = 'running'`` in its ``WHERE`` clause (heartbeat, finish, checkpoint,
  progress), so a stale holder changes nothing and learns so from what the statement returns.
  The token (``nonce:id``, 128 random bits per claim call) cannot be forged by an id handed out
  again after the file was lost and recreated.
* **Every call is safe to retry.** ``enqueue`` and ``claim`` with a ``request_id`` record it
  in the ``requests`` table in the same transaction, and a repeat is answered from it; a
  ``finish`` repeated after its reply was lost recognises its applied outcome by the token the
  row keeps; leader calls are idempotent for the current holder.
* **The write lock is held for statements only.** SQLite has one write lock per file; a
  process paused inside a write stops every writer. Parameters are built before ``BEGIN
  IMMEDIATE`` and results after ``COMMIT``; a lock that is not released within the busy
  timeout gives ``StoreUnavailable`` saying so.
* **The reaper is set-based.** ``reap_expired`` applies the stall rule to every expired lease
  with one ``UPDATE``; the candidate read that reports old owners runs under the same write lock.
* **The store's clock decides.** ``now=None`` means SQLite's ``julianday('now')``, read inside
  the transaction that uses it; this module never reads Python's clock for store time.
* **The file under the store is the file it opened.** A database deleted or replaced under a
  running process raises ``StoreGone`` (``_db.Connections.check_file``) instead of letting the
  process work on data nobody else sees; every row is readable, whatever bytes it holds.

All SQL lives in ``queries.sql`` and ``schema*.sql``; batches are bound as one JSON parameter and
expanded by ``json_each``, so every statement text is fixed and prepared once per connection.
Input is checked by :mod:`tether._limits` before any write (a batch is all or nothing); error
text goes through :func:`tether._text.clean_error`. Requires SQLite >= 3.35 (``RETURNING``,
``UPDATE ... FROM``).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from tether import _clock as clock
from tether._errors import JobNotFound
from tether._limits import check_job_id, check_jobs, check_json_text, check_text
from tether.stores._contract import (
    REAPED_ERROR,
    CancelResult,
    HeartbeatResult,
    JobRecord,
    Lease,
    NewJob,
    Outcome,
    Reaped,
    RetryResult,
)
from tether.stores._sqlite.admin import AdminMixin
from tether.stores._sqlite.aio import AsyncMixin
from tether.stores._sqlite.connection import Connections, guarded
from tether.stores._sqlite.ops import OpsMixin
from tether.stores._sqlite.rows import SCHEMA_VERSION, FinishPlan, Q, job_from_row, store_now
from tether.stores._sqlite.schedules import SchedulesMixin
from tether.stores._sqlite.schema import SchemaMixin
from tether.stores._sqlite.url import parse_url

_WAIT_POLL = 0.01
_MAX_REQUEST_ID = 255


def _request_id(value: str | None) -> str | None:
    return None if value is None else check_text(value, "request_id", limit=_MAX_REQUEST_ID)


class SQLiteStore(SchedulesMixin, AsyncMixin, SchemaMixin, AdminMixin, OpsMixin):
    """SQLite implementation of :class:`tether.stores._contract.Store`. Thread- and fork-safe.

    ``busy_timeout``: how long a write waits for another process's write lock before it
    raises StoreUnavailable. ``file_check_interval``: how often (seconds, at most) the store
    checks that its path still names the file it opened (StoreGone otherwise).
    """

    kind = "sqlite"

    def __init__(
        self, url: str, *, busy_timeout: float = 30.0, file_check_interval: float = 1.0
    ) -> None:
        self.url = url
        self.path = parse_url(url)
        self._db = Connections(self.path, busy_timeout, file_check_interval)
        self._wake = threading.Condition()
        self._wake_gen = 0
        self._seen = threading.local()
        self._aio_init()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.url!r})"

    # -- lifecycle (migrate, check_schema, info: SchemaMixin) --------------------------------
    def close(self) -> None:
        self._close_aio()
        self._db.close()
        self.notify(())

    @guarded
    def now(self) -> float:
        return store_now(self._db.get(), None)

    # -- producers -------------------------------------------------------------------------
    @guarded
    def enqueue(
        self,
        jobs: Sequence[NewJob],
        *,
        now: float | None = None,
        request_id: str | None = None,
    ) -> list[int]:
        """Insert the batch in one transaction. With ``request_id``, a repeat of the call
        within 24 h inserts nothing and returns the first call's ids."""
        check_jobs(jobs)
        request_id = _request_id(request_id)
        if not jobs:
            return []
        rows = [
            {
                "task": job.task,
                "queue": job.queue,
                "payload": job.payload,
                "priority": job.priority,
                "run_at": job.run_at,
                "delay": job.delay,
                "max_attempts": job.max_attempts,
                "max_stalls": job.max_stalls,
                "unique_key": job.unique_key,
                "now": now,
            }
            for job in jobs
        ]
        request = {"kind": "enqueue", "request_id": request_id, "reply": "", "now": now}
        ids: list[int] = []
        find, insert = Q["enqueue_find_unique"], Q["enqueue_insert"]
        with self._db.write() as conn:
            t = request["now"] = store_now(conn, now)
            cur = conn.cursor()
            replay = None
            if request_id is not None:
                replay = cur.execute(Q["request_find"], request).fetchone()
            if replay is None:
                for row in rows:
                    row["now"] = t
                    if row["unique_key"] is not None:
                        found = cur.execute(find, row).fetchone()
                        if found is not None:
                            ids.append(found[0])
                            continue
                    cur.execute(insert, row)
                    ids.append(int(cur.lastrowid or 0))
                if request_id is not None:
                    request["reply"] = json.dumps(ids)
                    cur.execute(Q["request_insert"], request)
        if replay is not None:
            return [int(i) for i in json.loads(replay[0])]
        self.notify(tuple({job.queue for job in jobs}))
        return ids

    @guarded
    def cancel(self, job_id: int, *, now: float | None = None) -> CancelResult:
        job_id = check_job_id(job_id)
        with self._db.write() as conn:
            t = store_now(conn, now)
            row = conn.execute(Q["cancel"], {"id": job_id, "now": t}).fetchone()
            exists = row is not None or conn.execute(Q["job_exists"], {"id": job_id}).fetchone()
        if not exists:
            raise JobNotFound(job_id)
        if row is None:
            return "finished"
        if row[0] == "cancelled":
            self._announce_finished()
            return "cancelled"
        return "requested"

    @guarded
    def retry_failed(
        self, job_ids: Sequence[int] | None, *, now: float | None = None
    ) -> RetryResult:
        ids = None if job_ids is None else json.dumps([check_job_id(i) for i in job_ids])
        if ids == "[]":
            return RetryResult(0)
        params: dict[str, Any] = {"ids": ids, "now": now}
        with self._db.write() as conn:
            params["now"] = store_now(conn, now)
            moved: int = conn.execute(Q["retry_failed"], params).rowcount
            conflicts = conn.execute(Q["retry_conflicts"], params).fetchall()
        if moved:
            self.notify(())
        return RetryResult(moved, tuple(row[0] for row in conflicts))

    # -- the lease protocol ------------------------------------------------------------------
    @guarded
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
        """Claim in one write; every claimed row's token is ``nonce:id``. The nonce is the
        ``request_id`` when given (a repeat of the call returns the jobs still running under
        it and claims nothing more), else 128 fresh random bits."""
        request_id = _request_id(request_id)
        if limit <= 0 or not queues:
            return []
        nonce = request_id if request_id is not None else secrets.token_hex(16)
        params = {
            "owner": owner,
            "queues": json.dumps(list(dict.fromkeys(queues))),
            "limit": limit,
            "lease_ttl": lease_ttl,
            "nonce": nonce,
            "now": now,
        }
        request = {"kind": "claim", "request_id": request_id, "reply": "", "now": now}
        with self._db.write() as conn:
            params["now"] = request["now"] = store_now(conn, now)
            if request_id is not None and conn.execute(Q["request_find"], request).fetchone():
                rows = conn.execute(Q["claim_replayed"], params).fetchall()
            else:
                rows = conn.execute(Q["claim"], params).fetchall()
                # Only a claim that granted something needs its record: a replay of an empty
                # claim may claim afresh (nothing was orphaned). Idle workers claim empty all
                # the time, and every written row lengthens the write lock's hold.
                if request_id is not None and rows:
                    conn.execute(Q["request_insert"], request)
        if len(rows) < limit:
            # The claimer may wait next: remember what it has seen, so a commit that lands
            # between this claim and wait_for_jobs still wakes it.
            self._seen.version = self._db.data_version()
        jobs = [job_from_row(row) for row in rows]
        jobs.sort(key=lambda j: (j.priority, j.run_at, j.id))
        return jobs

    @guarded
    def heartbeat(
        self,
        owner: str,
        leases: Sequence[Lease],
        lease_ttl: float,
        *,
        now: float | None = None,
    ) -> HeartbeatResult:
        batch = json.dumps([[le.job_id, le.attempt, le.owner, le.token] for le in leases])
        rows: list[Any] = []
        with self._db.write() as conn:
            t = store_now(conn, now)
            if leases:
                rows = conn.execute(
                    Q["heartbeat"], {"leases": batch, "lease_ttl": lease_ttl, "now": t}
                ).fetchall()
            conn.execute(Q["touch_worker"], {"owner": owner, "now": t})
        held = {Lease(row[0], row[1], row[2], row[3]): bool(row[4]) for row in rows}
        lost = frozenset(lease for lease in leases if lease not in held)
        cancel = frozenset(lease for lease, flag in held.items() if flag)
        return HeartbeatResult(lost=lost, cancel_requested=cancel)

    @guarded
    def finish(self, outcomes: Sequence[Outcome], *, now: float | None = None) -> list[Lease]:
        """Fenced outcome by outcome (see FinishPlan); an outcome this lease already applied
        in an earlier call whose reply was lost is not reported rejected."""
        if not outcomes:
            return []
        plan = FinishPlan(outcomes)
        accepted: set[tuple[int, int]] = set()
        with self._db.write() as conn:
            t = store_now(conn, now)
            for i, batch in enumerate(plan.rounds):
                for row in conn.execute(Q["finish"], {"outcomes": batch, "now": t}):
                    accepted.add((i, row[0]))
        replayed: set[tuple[int, int, str, str]] = set()
        maybe = plan.unapplied(accepted)
        if maybe is not None:  # rare: a stale outcome, or a replay; a plain read, no lock
            rows = self._db.get().execute(Q["finish_replayed"], {"leases": maybe})
            replayed = {(row[0], row[1], row[2], row[3]) for row in rows}
        if accepted and any(o.kind in ("error", "released", "stalled") for o in outcomes):
            self.notify(())
        if accepted:
            self._announce_finished()
        return plan.rejected(accepted, replayed)

    def _fenced_set(self, name: str, lease: Lease, value: str) -> bool:
        check_json_text(value, name.removeprefix("save_").removeprefix("set_"))
        params = {
            "id": lease.job_id,
            "attempt": lease.attempt,
            "owner": lease.owner,
            "token": lease.token,
            "value": value,
        }
        with self._db.write() as conn:
            changed: int = conn.execute(Q[name], params).rowcount
        return changed == 1

    @guarded
    def save_checkpoint(self, lease: Lease, checkpoint: str, *, now: float | None = None) -> bool:
        return self._fenced_set("save_checkpoint", lease, checkpoint)

    @guarded
    def set_progress(self, lease: Lease, progress: str, *, now: float | None = None) -> bool:
        return self._fenced_set("set_progress", lease, progress)

    @guarded
    def reap_expired(
        self, stall_grace: float = 0.0, *, now: float | None = None, limit: int = 1000
    ) -> list[Reaped]:
        if limit <= 0:
            return []
        with self._db.write() as conn:
            t = store_now(conn, now)
            rows = conn.execute(
                Q["reap"],
                {"cutoff": t - stall_grace, "limit": limit, "now": t, "error": REAPED_ERROR},
            ).fetchall()
        reaped = [Reaped(row[0], row[1], row[2], row[3], row[4]) for row in rows]
        reaped.sort(key=lambda r: r.job_id)
        if any(r.status == "pending" for r in reaped):
            self.notify(())
        if any(r.status != "pending" for r in reaped):
            self._announce_finished()
        return reaped

    @guarded
    def next_lease_expiry(self) -> float | None:
        value: float | None = self._db.get().execute(Q["next_lease_expiry"]).fetchone()[0]
        return value

    def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> bool:
        """Poll ``PRAGMA data_version`` (it moves when another connection commits) every 10 ms,
        and wake at once on an in-process :meth:`notify`. No transaction is held meanwhile.

        The baseline is what this thread saw at its last short claim (or last wait), so a
        commit that landed in between wakes the waiter at once instead of being missed.
        Raises StoreGone when the file was deleted or replaced (checked about once a second):
        an idle worker must notice too, not only a busy one."""
        deadline = clock.monotonic() + max(0.0, timeout)
        with self._wake:
            generation = self._wake_gen
        baseline: int | None = getattr(self._seen, "version", None)
        current: int | None
        try:
            current = self._db.data_version()
        except sqlite3.Error:
            current = baseline = None
        try:
            while True:
                if baseline is not None and current != baseline:
                    return True
                if baseline is None:
                    baseline = current
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    return False
                with self._wake:
                    if self._wake_gen == generation:
                        self._wake.wait(min(_WAIT_POLL, remaining))
                    if self._wake_gen != generation:
                        return True
                if current is not None:
                    try:
                        current = self._db.data_version()
                    except sqlite3.Error:
                        current = baseline = None
        finally:
            self._seen.version = current

    def notify(self, queues: Sequence[str]) -> None:
        with self._wake:
            self._wake_gen += 1
            self._wake.notify_all()


__all__ = ["SCHEMA_VERSION", "SQLiteStore"]
