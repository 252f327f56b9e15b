"""Per-attempt timeouts on one timer thread (a heap), not a thread or timer per job.

Invariant: a timeout fires at most once, only if it was not cancelled first, and never before
its time (``clock.monotonic``); an exception from a callback stops the worker (the loop dies
of it, ``tether._loop``), since a worker whose timeouts no longer fire breaks a task's limit.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from typing import Any

from tether import _clock as clock
from tether._errors import LeaseInterrupted
from tether._loop import Loop
from tether._task import Task
from tether._worker.registry import Registry, Running
from tether.stores._contract import Outcome

log = logging.getLogger("tether.worker")


class Deadlines(Loop):
    def __init__(self, on_error: Callable[[BaseException], None]) -> None:
        """The thread starts with the first timeout; ``stop()`` does not wait for it."""
        super().__init__("tether-deadlines", log=log, on_fatal=on_error, stop_wait=0.0,
                         died="deadlines died; stopping the worker")
        self._heap: list[tuple[float, int, int, Callable[[], None]]] = []
        self._live: set[int] = set()
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._started = False

    def add(self, seconds: float, callback: Callable[[], None]) -> int:
        """Call ``callback`` after ``seconds`` unless cancelled; returns a handle."""
        with self._cond:
            if not self._started:
                self._started = True
                self.start()
            handle = next(self._seq)
            self._live.add(handle)
            heapq.heappush(self._heap, (clock.monotonic() + seconds, handle, handle, callback))
            self._cond.notify()
            return handle

    def cancel(self, handle: int) -> None:
        with self._cond:
            self._live.discard(handle)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def round(self) -> float:
        """Wait for the next live deadline and run its callback."""
        with self._cond:
            while not self.stopping:
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)
                if self._heap and self._heap[0][0] <= clock.monotonic():
                    break
                wait = self._heap[0][0] - clock.monotonic() if self._heap else None
                self._cond.wait(wait)
            if self.stopping:
                return 0.0
            _, handle, _, callback = heapq.heappop(self._heap)
            self._live.discard(handle)
        callback()
        return 0.0


class Timeouts:
    """Each attempt's ``timeout`` (the task's), armed when its handler gets a slot: when it
    fires before the handler ends, the attempt is settled as a ``timeout`` error and the
    handler interrupted (whichever decides first wins, ``Registry.settle_once``)."""

    def __init__(self, deadlines: Deadlines, registry: Registry,
                 settle: Callable[[Running, Outcome | None], None]) -> None:
        self.deadlines = deadlines
        self._registry = registry
        self._settle = settle

    def arm(self, entry: Running, late: float = 0.0) -> None:
        """Start the attempt's timeout (its task's, ``entry.task``), ``late`` seconds after its
        handler started (a process-pool child reports the start after the fact)."""
        task = entry.task
        timeout = None if task is None else task.config.timeout
        if task is not None and timeout is not None:
            entry.extra["deadline"] = self.deadlines.add(max(0.0, timeout - late),
                                                         lambda: self._fire(entry, task))

    def cancel(self, entry: Running) -> None:
        handle = entry.extra.get("deadline")
        if isinstance(handle, int):
            self.deadlines.cancel(handle)

    def _fire(self, entry: Running, task: Task[Any, Any]) -> None:
        if not self._registry.settle_once(entry):
            return
        timeout = task.config.timeout
        log.warning("job %s attempt %s timed out after %ss", entry.ctx.id, entry.ctx.attempt,
                    timeout)
        entry.extra["timed_out"] = True
        entry.interrupt(LeaseInterrupted)
        self._settle(entry, Outcome(
            entry.lease, "error", error=f"timed out after {timeout}s", reason="timeout",
            retry_delay=task.config.retry.delay(entry.ctx.job.failures + 1)))
