"""The only module that reads the wall or monotonic clock.

Everything else asks here (through :data:`SYSTEM`, a :class:`Clock`), so one place says how
time is read and no code patches ``time`` globally. Lease expiry is *not* decided here: the
store's clock decides that. The worker's monotonic clock only bounds how long it trusts a lease
it could not renew.
"""

from __future__ import annotations

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


SYSTEM = SystemClock()


def wall() -> float:
    return SYSTEM.wall()


def monotonic() -> float:
    return SYSTEM.monotonic()


def sleep(seconds: float) -> None:
    SYSTEM.sleep(seconds)
