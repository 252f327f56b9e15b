"""In-flight attempts of one worker: the slots, and how long each lease is still trusted.

A lease is trusted locally until ``trusted_until`` on the worker's *monotonic* clock: the moment
the claim or the last successful renewal was *sent*, plus ``lease_ttl``. The store granted the
lease at its own now, which is never earlier than that send, so the store's expiry is never
earlier than ours: when the store cannot be reached, the worker gives the job up no later than
the reaper could take it.

A *slot* is taken while a handler runs; it frees the moment the handler returns, so the next
claim overlaps the write of the previous outcomes (claim, run and finish are pipelined instead of
serial). The *entry* stays until its outcome is settled (written, rejected, or not to be
written), so the heartbeater keeps renewing the lease until the outcome has landed. Entries are
capped at twice the slots, so a slow store cannot pile up unwritten outcomes. Entries are keyed
by lease, so a self-zombie's old entry never collides with a new claim of the same job.
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
    # Called after every interrupt (any thread): how a process pool stops the child running it.
    on_interrupt: Callable[[Running, type[Interrupted]], None] | None = None

    @property
    def lease(self) -> Lease:
        return self.ctx.lease

    def interrupt(self, why: type[Interrupted]) -> None:
        self.ctx.interrupt(why)
        task, loop = self.async_task, self.loop
        if task is not None and loop is not None:
            loop.call_soon_threadsafe(task.cancel)
        hook = self.on_interrupt
        if hook is not None:
            hook(self, why)


class Registry:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: dict[Lease, Running] = {}
        self._busy = 0  # handlers that have not returned yet
        self._cond = threading.Condition()

    def __len__(self) -> int:
        return len(self._entries)

    def free(self) -> int:
        return min(self.capacity - self._busy, 2 * self.capacity - len(self._entries))

    def wait_free(self, timeout: float, stop: Callable[[], bool]) -> int:
        """Block until a slot is free (or stop() or timeout); returns free slots."""
        with self._cond:
            self._cond.wait_for(lambda: stop() or self.free() > 0, timeout)
            return self.free()

    def wait_empty(self, timeout: float | None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._entries, timeout)

    def add(self, entry: Running) -> None:
        with self._cond:
            self._entries[entry.lease] = entry
            self._busy += 1

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
        self.mark_many([entry], returned=returned, settled=settled)

    def mark_many(self, entries: list[Running], *, returned: bool = False,
                  settled: bool = False) -> None:
        """Record handlers returning and/or outcomes settling, under one lock acquisition.

        Waiters are woken only on a change they can act on (a slot freed while none was, or the
        registry emptied): a wake-up per job would make the fetcher fight every handler thread
        for the GIL.
        """
        with self._cond:
            was_free = self.free()
            for entry in entries:
                if returned and not entry.returned:
                    entry.returned = True
                    self._busy -= 1
                entry.settled |= settled
                if entry.returned and entry.settled and self._entries.get(entry.lease) is entry:
                    del self._entries[entry.lease]
            if (was_free <= 0 < self.free()) or not self._entries:
                self._cond.notify_all()

    def settle_once(self, entry: Running) -> bool:
        """Claim the right to decide this attempt's outcome; only the first caller wins."""
        with self._cond:
            if entry.settled or entry.extra.get("settling"):
                return False
            entry.extra["settling"] = True
            return True
