"""Statement deadlines: a connection whose statement outlives its deadline is cut.

Invariant: a call on a pooled connection never waits on the server past its deadline; when it
would, its socket is shut down and the caller gets :class:`StoreUnavailable` naming the
deadline (see :mod:`tether.stores._deadline` for why tether bounds calls at all).

Why cut the socket: libpq has no read timeout, and psycopg waits on the socket for as long as
it takes. ``statement_timeout`` is enforced by the server, which is what does not answer;
a cancel request (``PQcancel``) needs a new connection through the same dead network.
``shutdown(2)`` on the socket, from outside, makes libpq's wait end at once with end-of-file:
psycopg raises OperationalError, the connection is broken and the pool drops it. The
statement may still have run on the server: a lost reply, which every store call survives.

The watchdog shuts down a duplicate of the socket's descriptor taken when the watch starts,
never the connection's own number: libpq closes its descriptor when it sees the connection
die, and that number may be reused by another socket before the watch ends. One daemon thread
per process watches every sync call (a thread per call would cost more than the statement);
async calls use their loop's timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg

from tether import _clock as clock
from tether._errors import StoreUnavailable

#: How long the thread keeps waking for nothing after the last watched call ended, before it
#: sleeps until the next one: calls come in runs, and waking it for each new call (instead of
#: letting it wake at the time it had planned) cost 20 us a call in context switches.
LINGER = 5.0

class _Line:
    """One watched call: a duplicate of its connection's socket, to shut down on time."""

    __slots__ = ("cut", "due", "sock")

    def __init__(self, conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any],
                 seconds: float) -> None:
        self.sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
        self.due = clock.monotonic() + max(0.0, seconds)
        self.cut = False

    def shut(self) -> None:
        self.cut = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def _timed_out(deadline: float) -> StoreUnavailable:
    return StoreUnavailable(
        f"PostgreSQL did not answer within the {deadline:g} s deadline (a network partition, "
        "or a stuck server or proxy); the connection was dropped. Retrying is safe; "
        "?deadline=SECONDS in the URL sets the deadline")


class Watchdog:
    """The thread that cuts sync calls past their deadline (one per process)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._lines: set[_Line] = set()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._next = float("inf")  # when the thread wakes next
        self._active = False  # a call was watched since the thread last looked

    @contextlib.contextmanager
    def watch(self, conn: psycopg.Connection[Any], seconds: float, *,
              deadline: float | None = None) -> Iterator[None]:
        """Cut ``conn`` if the block is still running ``seconds`` from now; a driver error
        raised because of the cut becomes StoreUnavailable naming ``deadline`` (the call's
        whole deadline, of which ``seconds`` may be what is left)."""
        line = _Line(conn, seconds)
        try:
            with self._cond:
                self._start()
                self._lines.add(line)
                self._active = True
                if line.due < self._next:
                    self._cond.notify()
            try:
                yield
            except psycopg.Error as exc:
                if line.cut:
                    raise _timed_out(deadline or seconds) from exc
                raise
            finally:
                with self._cond:  # from here on the thread never touches this socket
                    self._lines.discard(line)
        finally:
            line.close()

    def _start(self) -> None:
        """Start the thread (again in a forked child, which has none). Caller holds the lock."""
        pid = os.getpid()
        if self._thread is None or self._pid != pid:
            self._pid, self._next = pid, float("inf")
            self._thread = threading.Thread(target=self._run, name="tether-pg-deadlines",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        with self._cond:
            while True:
                now = clock.monotonic()
                for line in [line for line in self._lines if line.due <= now]:
                    self._lines.discard(line)
                    line.shut()
                if self._lines:
                    self._next = min(line.due for line in self._lines)
                else:  # linger once after activity, then sleep until a call comes
                    self._next = now + LINGER if self._active else float("inf")
                    self._active = False
                self._cond.wait(None if self._next == float("inf") else self._next - now)


def _reset_after_fork() -> None:
    """A forked child inherits the lock in whatever state the parent's threads left it."""
    WATCHDOG._cond = threading.Condition()
    WATCHDOG._lines = set()
    WATCHDOG._thread = None


@contextlib.asynccontextmanager
async def awatch(conn: psycopg.AsyncConnection[Any], seconds: float, *,
                 deadline: float | None = None) -> AsyncIterator[None]:
    """:meth:`Watchdog.watch` for the async producer, on the running loop's timer."""
    line = _Line(conn, seconds)
    timer = asyncio.get_running_loop().call_later(max(0.0, seconds), line.shut)
    try:
        yield
    except psycopg.Error as exc:
        if line.cut:
            raise _timed_out(deadline or seconds) from exc
        raise
    finally:
        timer.cancel()
        line.close()


WATCHDOG = Watchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)

__all__ = ["WATCHDOG", "Watchdog", "awatch"]
