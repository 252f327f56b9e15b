"""Maintenance on the Redis store (the :class:`~tether.stores._contract.Maintenance` role):
reaping, housekeeping, pruning, dead worker rows and leader leases (periodic ticks:
``schedules.py``).

Invariant: **the reaper is one script** (``reap.lua``): a range read of ``P:running`` by lease
expiry and the stall rule applied to every expired job, atomically, so two reapers give the
end state one of them alone would. Leader calls are scripts too, idempotent for the current
holder; ``leader_get`` and ``leader`` are plain reads of the lease hash.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from tether.stores._contract import REAPED_ERROR, JobStatus, Leadership, Reaped
from tether.stores._opsargs import check_prune
from tether.stores._redis import rows as codec
from tether.stores._redis.connection import io


class RedisMaintenance:
    """The :class:`~tether.stores._contract.Maintenance` role of :class:`RedisStore`."""

    prefix: str
    _client: Any

    if TYPE_CHECKING:  # RedisStore's: run a script (registered at start / on first use)
        def _run(self, name: str, *args: Any) -> Any: ...

        def _ops(self, name: str, *args: str) -> Any: ...

        def _key(self, *parts: str) -> str: ...

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

    def housekeeping(self) -> str | None:
        """Sorted-set members are removed at once, so claims never walk past old ones:
        nothing to do."""
        return None

    def prune(
        self, status: JobStatus, older_than: float, *, now: float | None = None, limit: int = 1000
    ) -> int:
        check_prune(status)
        if limit <= 0:
            return 0
        args = [codec.now_arg(now), status, codec.num(older_than), str(int(limit))]
        return int(self._run("prune", *args))

    def delete_dead_workers(self, older_than: float, *, now: float | None = None) -> int:
        return int(self._ops("ops_dead_workers", "" if now is None else repr(float(now)),
                             repr(float(older_than))))

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

    def leader(self, name: str, *, now: float | None = None) -> Leadership | None:
        with io():
            pipe = self._client.pipeline(transaction=True)
            pipe.hgetall(self._key("leader", name))
            pipe.time()
            row, (secs, micros) = pipe.execute()
        at = now if now is not None else int(secs) + int(micros) / 1_000_000
        d = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes)
             else v) for k, v in row.items()}
        if not d.get("holder") or float(d.get("expires_at", "-inf")) <= at:
            return None
        return Leadership(name, d["holder"], int(d["term"]), float(d["expires_at"]))


__all__ = ["RedisMaintenance"]
