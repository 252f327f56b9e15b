"""The only module that reads the wall or monotonic clock.

Everything else asks here, so tests can substitute a :class:`ManualClock` and no code patches
``time`` globally. Lease expiry is *not* decided here: the store's clock decides that. The
worker's monotonic clock only bounds how long it trusts a lease it could not renew.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def wall(self) -> float: ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def wall(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class ManualClock:
    """A clock that moves only when told; ``sleep`` advances it instead of blocking."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def wall(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        return self.wall()

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += max(0.0, seconds)


SYSTEM = SystemClock()


def wall() -> float:
    return SYSTEM.wall()


def monotonic() -> float:
    return SYSTEM.monotonic()


def sleep(seconds: float) -> None:
    SYSTEM.sleep(seconds)
