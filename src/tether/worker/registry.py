"""In-flight attempts of one worker: the slots, and how long each lease is still trusted.

A lease is trusted locally until ``trusted_until`` on the worker's *monotonic* clock: the moment
the claim or the last successful renewal was *sent*, plus ``lease_ttl``. The store granted the
lease at its own now, which is never earlier than that send, so the store's expiry is never
earlier than ours: when the store cannot be reached, the worker gives the job up no later than
the reaper could take it.

An entry leaves the registry only when both its handler has returned and its outcome is settled
(written, rejected, or not to be written), so a slot is never reused while a handler thread still
runs, and the heartbeater keeps renewing until the outcome has landed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from tether.context import JobContext
from tether.errors import Interrupted
from tether.stores.base import Lease


@dataclass(eq=False)
class Running:
    ctx: JobContext
    trusted_until: float
    returned: bool = False
    settled: bool = False  # an outcome was decided for this attempt
    lost: bool = False  # the store or the trust window says we no longer hold it
    async_task: asyncio.Task[object] | None = None
    loop: asyncio.AbstractEventLoop | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def lease(self) -> Lease:
        return self.ctx.lease

    def interrupt(self, why: type[Interrupted]) -> None:
        self.ctx.interrupt(why)
        task, loop = self.async_task, self.loop
        if task is not None and loop is not None:
            loop.call_soon_threadsafe(task.cancel)


class Registry:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: dict[int, Running] = {}
        self._cond = threading.Condition()

    def __len__(self) -> int:
        return len(self._entries)

    def free(self) -> int:
        return self.capacity - len(self._entries)

    def wait_free(self, timeout: float, stop: Callable[[], bool]) -> int:
        """Block until a slot is free (or stop() or timeout); returns free slots."""
        with self._cond:
            self._cond.wait_for(lambda: stop() or len(self._entries) < self.capacity, timeout)
            return self.capacity - len(self._entries)

    def wait_empty(self, timeout: float | None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._entries, timeout)

    def add(self, entry: Running) -> None:
        with self._cond:
            self._entries[entry.ctx.id] = entry

    def get(self, job_id: int) -> Running | None:
        return self._entries.get(job_id)

    def entries(self) -> list[Running]:
        with self._cond:
            return list(self._entries.values())

    def to_renew(self) -> list[Running]:
        """Entries whose lease the heartbeater must still renew."""
        with self._cond:
            return [
                e for e in self._entries.values()
                if not e.lost and not e.settled and not e.ctx.completed_in_transaction
            ]

    def mark(self, entry: Running, *, returned: bool = False, settled: bool = False) -> None:
        with self._cond:
            entry.returned |= returned
            entry.settled |= settled
            if entry.returned and entry.settled and self._entries.get(entry.ctx.id) is entry:
                del self._entries[entry.ctx.id]
                self._cond.notify_all()

    def settle_once(self, entry: Running) -> bool:
        """Claim the right to decide this attempt's outcome; only the first caller wins."""
        with self._cond:
            if entry.settled or entry.extra.get("settling"):
                return False
            entry.extra["settling"] = True
            return True
