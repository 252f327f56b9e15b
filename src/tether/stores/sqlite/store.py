"""The SQLite store: tether's embedded default, for one machine and many worker processes.

Invariants this module holds (see ``tether.stores.base`` for the contract):

* **The claim is the lease grant, in one write.** ``claim`` is a single
  ``UPDATE ... WHERE id IN (SELECT ... LIMIT n) RETURNING`` inside ``BEGIN IMMEDIATE``: the rows
  become ``running`` with owner, lease, ``attempt + 1`` and ``started_at`` together. The write
  lock serialises claimers (threads and processes), so no two receive the same (job, attempt).
* **Every write about a claimed job is fenced** by ``(id, attempt, locked_by)`` *and*
  ``status = 'running'`` in its ``WHERE`` clause (heartbeat, finish, checkpoint, progress), so a
  stale holder changes nothing and learns so from what the statement returns.
* **The reaper is set-based.** ``reap_expired`` applies the stall rule to every expired lease
  with one ``UPDATE``; the candidate read that reports old owners runs under the same write lock.
* **The store's clock decides.** ``now=None`` means SQLite's ``julianday('now')``, read inside
  the transaction that uses it; this module never reads Python's clock for store time.

All SQL lives in ``queries.sql`` / ``schema.sql``; batches are bound as one JSON parameter and
expanded by ``json_each``, so every statement text is fixed and prepared once per connection.
Requires SQLite >= 3.35 (``RETURNING``, ``UPDATE ... FROM``).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from tether import clock
from tether.errors import JobNotFound, SchemaError
from tether.stores.base import (
    REAPED_ERROR,
    CancelResult,
    HeartbeatResult,
    Job,
    Lease,
    NewJob,
    Outcome,
    Reaped,
    StoreInfo,
)
from tether.stores.sqlite._admin import AdminMixin
from tether.stores.sqlite._db import Connections, guarded, parse_url
from tether.stores.sqlite._rows import (
    SCHEMA,
    SCHEMA_VERSION,
    Q,
    job_from_row,
    outcome_rows,
    store_now,
)

_TABLES = frozenset({"jobs", "workers", "leaders", "schema_version"})
_WAIT_POLL = 0.01


class SQLiteStore(AdminMixin):
    """SQLite implementation of :class:`tether.stores.base.Store`. Thread- and fork-safe."""

    kind = "sqlite"

    def __init__(self, url: str, *, busy_timeout: float = 30.0) -> None:
        self.url = url
        self.path = parse_url(url)
        self._db = Connections(self.path, busy_timeout)
        self._wake = threading.Condition()
        self._wake_gen = 0
        self._seen = threading.local()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.url!r})"

    # -- lifecycle -------------------------------------------------------------------------
    @guarded
    def migrate(self) -> int:
        with self._db.write() as conn:
            for statement in SCHEMA.values():
                conn.execute(statement)
            current = conn.execute(Q["schema_version"]).fetchone()[0]
            if current is not None and current > SCHEMA_VERSION:
                raise SchemaError(
                    f"SQLite schema version {current} is newer than this tether knows "
                    f"({SCHEMA_VERSION}); upgrade tether"
                )
            conn.execute(
                Q["schema_version_insert"],
                {"version": SCHEMA_VERSION, "now": store_now(conn, None)},
            )
        return SCHEMA_VERSION

    @guarded
    def check_schema(self) -> None:
        conn = self._db.get()
        found = {row[0] for row in conn.execute(Q["schema_tables"])}
        missing = _TABLES - found
        if missing:
            raise SchemaError(
                f"SQLite schema is missing tables {sorted(missing)} in {self.path!r}: "
                "run `tether migrate`"
            )
        version = conn.execute(Q["schema_version"]).fetchone()[0]
        if version is None:
            raise SchemaError(f"SQLite schema in {self.path!r} has no version: run migrate")
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"SQLite schema version {version} is newer than this tether knows "
                f"({SCHEMA_VERSION}); upgrade tether"
            )

    def close(self) -> None:
        self._db.close()
        self.notify(())

    @guarded
    def info(self) -> StoreInfo:
        conn = self._db.get()
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        try:
            version = conn.execute(Q["schema_version"]).fetchone()[0] or 0
        except sqlite3.OperationalError:
            version = 0
        return StoreInfo(
            kind=self.kind,
            url=self.url,
            schema_version=int(version),
            extra={
                "path": self.path,
                "journal_mode": str(mode),
                "sqlite_version": sqlite3.sqlite_version,
            },
        )

    @guarded
    def now(self) -> float:
        return store_now(self._db.get(), None)

    # -- producers -------------------------------------------------------------------------
    @guarded
    def enqueue(self, jobs: Sequence[NewJob], *, now: float | None = None) -> list[int]:
        for job in jobs:
            if job.max_attempts <= 0:
                raise ValueError(f"max_attempts must be positive, got {job.max_attempts}")
            if job.max_stalls < 0:
                raise ValueError(f"max_stalls must not be negative, got {job.max_stalls}")
        if not jobs:
            return []
        ids: list[int] = []
        find, insert = Q["enqueue_find_unique"], Q["enqueue_insert"]
        with self._db.write() as conn:
            t = store_now(conn, now)
            cur = conn.cursor()
            for job in jobs:
                if job.unique_key is not None:
                    row = cur.execute(find, {"unique_key": job.unique_key}).fetchone()
                    if row is not None:
                        ids.append(row[0])
                        continue
                cur.execute(
                    insert,
                    {
                        "task": job.task,
                        "queue": job.queue,
                        "payload": job.payload,
                        "priority": job.priority,
                        "run_at": job.run_at if job.run_at is not None else t + job.delay,
                        "max_attempts": job.max_attempts,
                        "max_stalls": job.max_stalls,
                        "unique_key": job.unique_key,
                        "now": t,
                    },
                )
                ids.append(int(cur.lastrowid or 0))
        self.notify(tuple({job.queue for job in jobs}))
        return ids

    @guarded
    def cancel(self, job_id: int, *, now: float | None = None) -> CancelResult:
        with self._db.write() as conn:
            t = store_now(conn, now)
            row = conn.execute(Q["cancel"], {"id": job_id, "now": t}).fetchone()
            if row is not None:
                return "cancelled" if row[0] == "cancelled" else "requested"
            if conn.execute(Q["job_exists"], {"id": job_id}).fetchone() is None:
                raise JobNotFound(job_id)
            return "finished"

    @guarded
    def retry_failed(self, job_ids: Sequence[int] | None, *, now: float | None = None) -> int:
        ids = None if job_ids is None else json.dumps([int(i) for i in job_ids])
        if ids == "[]":
            return 0
        with self._db.write() as conn:
            t = store_now(conn, now)
            moved = conn.execute(Q["retry_failed"], {"ids": ids, "now": t}).rowcount
        if moved:
            self.notify(())
        return moved

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
    ) -> list[Job]:
        if limit <= 0 or not queues:
            return []
        params = {
            "owner": owner,
            "queues": json.dumps(list(dict.fromkeys(queues))),
            "limit": limit,
            "lease_ttl": lease_ttl,
            "now": now,
        }
        with self._db.write() as conn:
            params["now"] = store_now(conn, now)
            rows = conn.execute(Q["claim"], params).fetchall()
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
        with self._db.write() as conn:
            t = store_now(conn, now)
            rows: list[Any] = []
            if leases:
                batch = json.dumps([[lease.job_id, lease.attempt, lease.owner] for lease in leases])
                rows = conn.execute(
                    Q["heartbeat"], {"leases": batch, "lease_ttl": lease_ttl, "now": t}
                ).fetchall()
            conn.execute(Q["touch_worker"], {"owner": owner, "now": t})
        held = {Lease(row[0], row[1], row[2]): bool(row[3]) for row in rows}
        lost = frozenset(lease for lease in leases if lease not in held)
        cancel = frozenset(lease for lease, flag in held.items() if flag)
        return HeartbeatResult(lost=lost, cancel_requested=cancel)

    @guarded
    def finish(self, outcomes: Sequence[Outcome], *, now: float | None = None) -> list[Lease]:
        if not outcomes:
            return []
        rounds = outcome_rows(outcomes)
        accepted: set[tuple[int, int]] = set()
        with self._db.write() as conn:
            t = store_now(conn, now)
            for i, batch in enumerate(rounds):
                rows = conn.execute(
                    Q["finish"], {"outcomes": json.dumps(batch), "now": t}
                ).fetchall()
                accepted.update((row[0], i) for row in rows)
        rejected: list[Lease] = []
        requeued = False
        position: dict[int, int] = {}
        for o in outcomes:
            job_id = o.lease.job_id
            i = position.get(job_id, 0)
            position[job_id] = i + 1
            if (job_id, i) not in accepted:
                rejected.append(o.lease)
            elif o.kind in ("error", "released", "stalled"):
                requeued = True
        if requeued:
            self.notify(())
        return rejected

    def _fenced_set(self, name: str, lease: Lease, value: str) -> bool:
        params = {
            "id": lease.job_id,
            "attempt": lease.attempt,
            "owner": lease.owner,
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
        return reaped

    @guarded
    def next_lease_expiry(self) -> float | None:
        value: float | None = self._db.get().execute(Q["next_lease_expiry"]).fetchone()[0]
        return value

    def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> bool:
        """Poll ``PRAGMA data_version`` (it moves when another connection commits) every 10 ms,
        and wake at once on an in-process :meth:`notify`. No transaction is held meanwhile.

        The baseline is what this thread saw at its last short claim (or last wait), so a
        commit that landed in between wakes the waiter at once instead of being missed."""
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
