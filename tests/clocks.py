"""A clock for tests that injects into ``tether._clock`` (every module of tether reads time
there): ``sleep`` on the test's own thread does not block, it moves the clock on and records
the pause. Other threads (a store's background loops) sleep for real, so none of them spins.

A test then asserts on the pauses tether asked for (``slept``), a condition that holds however
loaded the machine is, instead of timing the call with the wall clock.
"""

from __future__ import annotations

import threading
import time

import pytest

from tether import _clock


class JumpingClock:
    """Real time plus every pause the owner thread asked of ``sleep`` (which returns at once
    there)."""

    def __init__(self) -> None:
        self._owner = threading.get_ident()
        self._lock = threading.Lock()
        self._ahead = 0.0
        self.pauses: list[float] = []

    @property
    def slept(self) -> float:
        with self._lock:
            return sum(self.pauses)

    def wall(self) -> float:
        with self._lock:
            return time.time() + self._ahead

    def monotonic(self) -> float:
        with self._lock:
            return time.monotonic() + self._ahead

    def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        if threading.get_ident() != self._owner:
            time.sleep(seconds)
            return
        with self._lock:
            self._ahead += seconds
            self.pauses.append(seconds)


def install(monkeypatch: pytest.MonkeyPatch) -> JumpingClock:
    """Make a JumpingClock the clock every ``tether._clock`` call reads, for this test."""
    clock = JumpingClock()
    monkeypatch.setattr(_clock, "SYSTEM", clock)
    return clock
