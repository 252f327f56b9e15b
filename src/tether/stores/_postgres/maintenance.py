"""Maintenance on the PostgreSQL store (the :class:`~tether.stores._contract.Maintenance`
role): reaping, housekeeping, pruning, dead worker rows and leader leases (periodic ticks:
``schedules.py``).

Invariant: **the reaper is one set-based UPDATE** over the partial ``lease_until`` index,
bounded by a ``LIMIT ... FOR UPDATE SKIP LOCKED`` CTE, with the stall rule in a CASE (the
contract's invariant 3). None of these is on a worker's hot path; each is one statement
(housekeeping: a bounded delete, then a VACUUM only when the statistics say it pays).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from tether.stores._contract import REAPED_ERROR, JobStatus, Leadership, Reaped
from tether.stores._opsargs import check_prune
from tether.stores._postgres.plumbing import Plumbing, Row

#: Request records are kept at least this long (seconds) before housekeeping deletes them.
REQUEST_TTL = 24 * 3600.0


class PostgresMaintenance(Plumbing):
    """The :class:`~tether.stores._contract.Maintenance` role of :class:`PostgresStore`."""

    vacuum_threshold: int

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

    def housekeeping(self) -> str | None:
        """Delete request records older than REQUEST_TTL, then VACUUM the jobs table when
        claims have left enough dead row versions (see the protocol's docstring)."""
        done: list[str] = []
        with self._connector.connection() as pooled:
            old = pooled.execute(self.queries["prune_requests"],
                                 {"keep": REQUEST_TTL, "limit": 10_000}).rowcount
        if old > 0:
            done.append(f"deleted {old} request record(s)")
        row = self._one("dead_tuples", {})
        dead = int(row[0]) if row else 0
        if dead >= self.vacuum_threshold:
            # A VACUUM of a big table rightly runs long: not bound by the call deadline.
            with self._connector.connection(bounded=False) as pooled:
                pooled.execute(self.queries["vacuum_jobs"])
            done.append(f"vacuumed jobs ({dead} dead row versions)")
        return "; ".join(done) or None

    def prune(
        self, status: JobStatus, older_than: float, *, now: float | None = None, limit: int = 1000
    ) -> int:
        check_prune(status)
        if limit <= 0:
            return 0
        params = {"status": status, "older_than": older_than, "now": now, "limit": limit}
        row = self._one("prune", params)
        return int(row[0]) if row else 0

    def delete_dead_workers(self, older_than: float, *, now: float | None = None) -> int:
        gone = len(self._rows("delete_dead_workers",
                              {"now": now, "older_than": float(older_than)}))
        self.forget_tokens(older_than)  # their liveness tokens, once reaped (liveness.py)
        return gone

    if TYPE_CHECKING:
        def forget_tokens(self, older_than: float) -> None: ...  # PostgresLiveness'


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

    def leader_get(self, name: str) -> Leadership | None:
        """The current holder of ``name`` (expired or not); None when nobody holds it."""
        return _leadership(self._one("leader_get", {"name": name}))

    def leader(self, name: str, *, now: float | None = None) -> Leadership | None:
        rows = self._rows("leader", {"name": name, "now": now})
        if not rows:
            return None
        n, holder, term, expires = rows[0]
        return Leadership(str(n), str(holder), int(term), float(expires))


def _leadership(row: Row | None) -> Leadership | None:
    if row is None:
        return None
    name, holder, term, expires_at = row
    return Leadership(str(name), str(holder), int(term), float(expires_at))



__all__ = ["REQUEST_TTL", "PostgresMaintenance"]
