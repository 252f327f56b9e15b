"""Shutdown: drain on the first signal, hand leases back on the second or at the deadline.

The first SIGTERM/SIGINT stops claiming and lets in-flight jobs finish for up to
``shutdown_timeout``. The second signal, or the timeout, interrupts the handlers and hands every
lease back at once (``released``: pending, due now, an interruption, neither a failure nor a
stall) and wakes other workers, so nothing waits for lease expiry after a clean stop.
"""

from __future__ import annotations

import enum
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType

log = logging.getLogger("tether.shutdown")


class Flag:
    """``threading.Event`` on a *reentrant* lock.

    A signal handler runs on the main thread between two bytecodes, so a second SIGTERM can be
    handled inside the first one's ``set()``. ``threading.Event`` holds a plain Lock there, and
    the nested ``set()`` would wait for it forever: the worker hung on a fast double SIGTERM.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._flag = False

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        with self._cond:
            self._flag = True
            self._cond.notify_all()

    def clear(self) -> None:
        with self._cond:
            self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._flag, timeout)


class Phase(enum.IntEnum):
    RUNNING = 0
    DRAINING = 1
    FORCED = 2


class Shutdown:
    def __init__(self, draining: str = "draining in-flight jobs",
                 grace: float | None = None) -> None:
        # Say how long the drain may take and how to cut it short: an operator pressing
        # Ctrl-C otherwise cannot tell a drain from a hang.
        if grace is not None:
            draining += (f"; waiting up to {grace:g}s for them to finish (shutdown_timeout). "
                         "Send the signal again (Ctrl-C) to hand their leases back now")
        #: What the first signal starts, for its log line (a wait for the store says
        #: something else while it lasts: startup.py).
        self.draining = draining
        self.phase = Phase.RUNNING
        self.changed = Flag()
        self.fatal: BaseException | None = None
        self._lock = threading.RLock()  # reentrant: taken by signal handlers (see Flag)

    @property
    def stopping(self) -> bool:
        return self.phase >= Phase.DRAINING

    def request(self, why: str = "stop requested", *, signalled: bool = True) -> None:
        """Move one phase on: running → draining → forced.

        A stop the program asked for itself (a burst with nothing left, ``close()``) is logged
        at INFO without the Ctrl-C hint: at the end of every ``drain(app)`` in a user's tests a
        warning telling them to send a signal again would be noise, and wrong advice."""
        with self._lock:
            if self.phase < Phase.FORCED:
                self.phase = Phase(self.phase + 1)
                if self.phase == Phase.FORCED:
                    log.warning("%s: handing leases back now", why)
                elif signalled:
                    log.warning("%s: %s", why, self.draining)
                else:
                    log.info("%s: finishing in-flight jobs", why)
        self.changed.set()

    def force(self, why: str, fatal: BaseException | None = None) -> None:
        with self._lock:
            self.phase = Phase.FORCED
            if fatal is not None and self.fatal is None:
                self.fatal = fatal
        log.warning("%s: handing leases back now", why)
        self.changed.set()

    def install(self) -> Callable[[], None]:
        """Route SIGTERM/SIGINT here (main thread only); returns a function that undoes it."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handler(signum: int, _frame: FrameType | None) -> None:
            self.request(f"received {signal.Signals(signum).name}")

        old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for s, h in old.items():
                signal.signal(s, h)

        return restore
