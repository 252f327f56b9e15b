"""Per-attempt timeouts on one timer thread (a heap), not a thread or timer per job."""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable

from tether import clock


class Deadlines:
    def __init__(self, on_error: Callable[[BaseException], None]) -> None:
        self._heap: list[tuple[float, int, int, Callable[[], None]]] = []
        self._live: set[int] = set()
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._on_error = on_error
        self._thread = threading.Thread(target=self._run, name="tether-deadlines", daemon=True)
        self._started = False

    def add(self, seconds: float, callback: Callable[[], None]) -> int:
        """Call ``callback`` after ``seconds`` unless cancelled; returns a handle."""
        with self._cond:
            if not self._started:
                self._started = True
                self._thread.start()
            handle = next(self._seq)
            self._live.add(handle)
            heapq.heappush(self._heap, (clock.monotonic() + seconds, handle, handle, callback))
            self._cond.notify()
            return handle

    def cancel(self, handle: int) -> None:
        with self._cond:
            self._live.discard(handle)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    while self._heap and self._heap[0][1] not in self._live:
                        heapq.heappop(self._heap)
                    if self._heap and self._heap[0][0] <= clock.monotonic():
                        break
                    wait = self._heap[0][0] - clock.monotonic() if self._heap else None
                    self._cond.wait(wait)
                if self._stopped:
                    return
                _, handle, _, callback = heapq.heappop(self._heap)
                self._live.discard(handle)
            try:
                callback()
            except BaseException as exc:  # a failing side loop must stop the worker
                self._on_error(exc)
                return
