"""Periodic schedules of the Redis store (issue #12): ``schedule_tick`` and ``schedules`` of the
:class:`~tether.stores._contract.Maintenance` role.

Invariant: **a tick and its job are one script.** ``schedule_tick.lua`` compares the tick with
the recorded one, records it and enqueues the job (with ``enqueue``'s own Lua, ``_lib.lua``) in
one EVALSHA, which Redis runs alone: of several leaders or replays offering the same tick,
exactly one enqueues. Keys: ``P:schedule:{name}`` (hash) and ``P:schedules`` (set of names).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.stores._contract import NewJob, ScheduleState
from tether.stores._redis import rows as codec
from tether.stores._redis.connection import io
from tether.stores._schedule_args import check_spec, check_tick


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisSchedules:
    """The periodic-schedule part of :class:`RedisStore`'s Maintenance role."""

    prefix: str
    _client: Any

    if TYPE_CHECKING:
        def _ops(self, name: str, *args: str) -> Any: ...  # RedisStore's: runs a script

    def schedule_tick(
        self, name: str, tick: float, job: NewJob | None, *, now: float | None = None,
        spec: str | None = None,
    ) -> int | None:
        name, tick = check_tick(name, tick, job)
        spec = check_spec(spec)
        fields = [] if job is None else codec.enqueue_args([job])
        # The spec travels as '' (keep the recorded one) or '=' + the spec (any text).
        reply = int(self._ops("schedule_tick", codec.now_arg(now), name, codec.num(tick),
                              "" if spec is None else "=" + spec, *fields))
        return None if reply < 0 else reply

    def schedules(self) -> list[ScheduleState]:
        key = f"{self.prefix}:schedules"
        with io():
            names = sorted(_text(n) for n in self._client.smembers(key))
            pipe = self._client.pipeline(transaction=False)
            for n in names:
                pipe.hmget(f"{key[:-1]}:{n}", "last_tick", "last_job_id", "updated_at", "spec")
            rows = pipe.execute()
        states = []
        for n, (tick, job_id, updated, spec) in zip(names, rows, strict=True):
            if tick is None:
                continue
            states.append(ScheduleState(n, float(_text(tick)),
                                        None if job_id is None else int(_text(job_id)),
                                        float(_text(updated)),
                                        None if spec is None else _text(spec)))
        return states
