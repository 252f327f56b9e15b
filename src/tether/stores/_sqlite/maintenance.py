"""Maintenance on the SQLite store (the :class:`~tether.stores._contract.Maintenance` role):
reaping, housekeeping, pruning, dead worker rows and leader leases (periodic ticks:
``schedules.py``).

Invariant: **the reaper is set-based.** ``reap_expired`` applies the stall rule to every expired
lease with one ``UPDATE``; the candidate read that reports old owners runs under the same write
lock. Leader calls are idempotent for the current holder, so a repeat after a lost reply is
harmless. Same rules as every write of the store: ``BEGIN IMMEDIATE``, SQL in ``queries.sql``
and ``ops.sql``, ``now=None`` means SQLite's clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.stores._contract import REAPED_ERROR, JobStatus, Leadership, Reaped
from tether.stores._opsargs import check_prune
from tether.stores._sqlite.connection import Connections, guarded
from tether.stores._sqlite.links import any_link, resolve, unlink
from tether.stores._sqlite.rows import OPS, Q, store_now

if TYPE_CHECKING:
    from collections.abc import Sequence

#: How long a request id protects a call against replays (base contract: 24 h).
REQUEST_TTL = 86_400.0
_PRUNE_BATCH = 10_000


class SQLiteMaintenance:
    """The :class:`~tether.stores._contract.Maintenance` role of :class:`SQLiteStore`."""

    _db: Connections

    if TYPE_CHECKING:
        def notify(self, queues: Sequence[str]) -> None: ...  # SQLiteLeases'

        def _announce_finished(self) -> None: ...  # SQLiteProducer's

        def forget_reaped(self, older_than: float) -> int: ...  # SQLiteLiveness'

    @guarded
    def reap_expired(
        self, stall_grace: float = 0.0, *, now: float | None = None, limit: int = 1000
    ) -> list[Reaped]:
        if limit <= 0:
            return []
        released = False
        with self._db.write() as conn:
            t = store_now(conn, now)
            rows = conn.execute(
                Q["reap"],
                {"cutoff": t - stall_grace, "limit": limit, "now": t, "error": REAPED_ERROR},
            ).fetchall()
            ended = [[row[0], row[3]] for row in rows if row[5] and row[3] != "pending"]
            if ended:  # jobs the reap ended that have children (links.py)
                released, _ = resolve(conn, ended, t)
        reaped = [Reaped(row[0], row[1], row[2], row[3], row[4]) for row in rows]
        reaped.sort(key=lambda r: r.job_id)
        if released or any(r.status == "pending" for r in reaped):
            self.notify(())
        if any(r.status != "pending" for r in reaped):
            self._announce_finished()
        return reaped

    @guarded
    def next_lease_expiry(self) -> float | None:
        value: float | None = self._db.get().execute(Q["next_lease_expiry"]).fetchone()[0]
        return value

    @guarded
    def housekeeping(self) -> str | None:
        """Delete request records (replay protection of enqueue/claim) older than 24 h.

        Indexes need nothing: SQLite deletes index entries in place (no MVCC versions), so
        claims never walk past old ones. The maintainer calls this every few seconds, so the
        write lock is taken only when a plain read (one index probe) finds records due."""
        conn = self._db.get()
        t = store_now(conn, None)
        cutoff = t - REQUEST_TTL
        oldest = conn.execute(Q["requests_oldest"]).fetchone()[0]
        if oldest is None or oldest >= cutoff:
            return None
        with self._db.write() as conn:
            deleted: int = conn.execute(
                Q["requests_prune"], {"cutoff": cutoff, "limit": _PRUNE_BATCH}
            ).rowcount
        return f"deleted {deleted} request records older than 24 h" if deleted else None

    @guarded
    def prune(
        self, status: JobStatus, older_than: float, *, now: float | None = None, limit: int = 1000
    ) -> int:
        check_prune(status)
        if limit <= 0:
            return 0
        with self._db.write() as conn:
            t = store_now(conn, now)
            params = {"status": status, "cutoff": t - older_than, "limit": limit}
            if not any_link(conn):
                deleted: int = conn.execute(Q["prune"], params).rowcount
                return deleted
            ids = [row[0] for row in conn.execute(Q["prune_linked"], params)]
            unlink(conn, ids)
        return len(ids)

    @guarded
    def delete_dead_workers(self, older_than: float, *, now: float | None = None) -> int:
        self.forget_reaped(older_than)  # their liveness token files (liveness.py)
        with self._db.write() as conn:
            t = store_now(conn, now)
            return conn.execute(OPS["delete_dead_workers"],
                                {"now": t, "older_than": float(older_than)}).rowcount

    @guarded
    def leader_acquire(
        self, name: str, holder: str, ttl: float, *, now: float | None = None
    ) -> Leadership | None:
        with self._db.write() as conn:
            t = store_now(conn, now)
            row = conn.execute(
                Q["leader_acquire"], {"name": name, "holder": holder, "ttl": ttl, "now": t}
            ).fetchone()
        return None if row is None else Leadership(*row)

    @guarded
    def leader_renew(
        self, name: str, holder: str, term: int, ttl: float, *, now: float | None = None
    ) -> Leadership | None:
        with self._db.write() as conn:
            t = store_now(conn, now)
            row = conn.execute(
                Q["leader_renew"],
                {"name": name, "holder": holder, "term": term, "ttl": ttl, "now": t},
            ).fetchone()
        return None if row is None else Leadership(*row)

    @guarded
    def leader_release(self, name: str, holder: str, term: int) -> bool:
        with self._db.write() as conn:
            changed: int = conn.execute(
                Q["leader_release"], {"name": name, "holder": holder, "term": term}
            ).rowcount
        return changed == 1

    @guarded
    def leader_get(self, name: str) -> Leadership | None:
        row = self._db.get().execute(Q["leader_get"], {"name": name}).fetchone()
        return None if row is None else Leadership(*row)

    @guarded
    def leader(self, name: str, *, now: float | None = None) -> Leadership | None:
        conn = self._db.get()
        row = conn.execute(OPS["leader"], {"name": name, "now": store_now(conn, now)}).fetchone()
        return None if row is None else Leadership(row[0], row[1], int(row[2]), float(row[3]))
