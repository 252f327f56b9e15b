"""Operations methods of the Redis store (issue #11), a mixin of RedisStore.

Multi-key steps are Lua scripts (``ops_*.lua``, with the shared prelude), atomic like the rest
of the store. Paused queues are one set, ``P:paused``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether import _limits as limits
from tether.stores._contract import JobFilter, JobRecord, JobStatus, Leadership
from tether.stores._opsargs import check_purge, check_search
from tether.stores._redis import rows as codec
from tether.stores._redis.calls import script_text
from tether.stores._redis.connection import io

PURGE_BATCH = 500
SEARCH_BUDGET = 5000  # job hashes examined per script call


class OpsMixin:
    prefix: str
    _client: Any

    def _key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def _ops(self, name: str, *args: str) -> Any:
        scripts: dict[str, Any] = self.__dict__.setdefault("_ops_scripts", {})
        if name not in scripts:
            scripts[name] = self._client.register_script(script_text(name))
        with io():
            return scripts[name](args=[self.prefix, *args])

    def search_jobs(
        self, filter: JobFilter, *, cursor: int | None = None, limit: int = 100
    ) -> list[JobRecord]:
        check_search(cursor, limit)
        jobs: list[JobRecord] = []
        at = "" if cursor is None else str(int(cursor))
        while True:
            rows, at = self._ops(
                "ops_search", filter.status or "", filter.queue or "", filter.task or "",
                "" if filter.since is None else repr(float(filter.since)), at,
                str(limit - len(jobs)), "1" if filter.newest_first else "0", str(SEARCH_BUDGET))
            jobs += [codec.job_from_flat(row) for row in rows]
            at = at.decode() if isinstance(at, bytes) else str(at)
            if not at or len(jobs) >= limit:
                return jobs

    def purge(self, queue: str, statuses: Sequence[JobStatus]) -> int:
        chosen = check_purge(queue, statuses)
        total = 0
        while chosen:
            n = int(self._ops("ops_purge", queue, "\n".join(chosen), str(PURGE_BATCH)))
            total += n
            if n < PURGE_BATCH:
                break
        return total

    def pause_queue(self, queue: str) -> bool:
        limits.check_text(queue, "queue", limit=limits.MAX_NAME)
        with io():
            return bool(self._client.sadd(self._key("paused"), queue))

    def resume_queue(self, queue: str) -> bool:
        limits.check_text(queue, "queue", limit=limits.MAX_NAME)
        with io():
            resumed = bool(self._client.srem(self._key("paused"), queue))
        if resumed:
            self.notify([queue])  # type: ignore[attr-defined]
        return resumed

    def paused_queues(self) -> list[str]:
        with io():
            members = self._client.smembers(self._key("paused"))
        return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)

    def delete_dead_workers(self, older_than: float, *, now: float | None = None) -> int:
        return int(self._ops("ops_dead_workers", "" if now is None else repr(float(now)),
                             repr(float(older_than))))

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
