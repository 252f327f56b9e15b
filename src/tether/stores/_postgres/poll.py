"""Wake-ups by polling, behind a transaction pooler with no direct connection (issue 18, A).

Through PgBouncer in ``pool_mode = transaction`` a LISTEN lands on whichever server connection
served that one statement and is heard by whoever gets that connection next, and a session
advisory lock is held for a stranger; so nothing here LISTENs or locks. Instead:

* an idle worker's ``wait_for_jobs`` returns after at most :data:`~pooler.JOBS_POLL` seconds
  (so it claims again): that is the pick-up bound (plus one claim's round trip);
* ``wait_for_signal`` never hears a signal: a cancel reaches a worker at its next heartbeat,
  a pause at its next read of the paused set (issue #22's push needs LISTEN);
* ``wait_for_finish`` reads its jobs' status every :data:`~pooler.FINISH_POLL` seconds (the
  waiting loop of ``producer.py`` / ``aio.py``, since this listener is never "done ready").

Nobody holds the jobs or done key, so every enqueue and finish skips its NOTIFY (the gates'
``pg_try_advisory_xact_lock`` is transaction-scoped and works through the pooler); a process
on the same database that does listen (``direct=``, or no pooler) holds the key and gets them.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether import _clock as clock
from tether.stores._postgres.listen import Listener
from tether.stores._postgres.pooler import FINISH_POLL, JOBS_POLL


class PollingListener(Listener):
    """The :class:`Listener` interface with no connection and no thread."""

    poll_every = FINISH_POLL
    listens = False

    def wait(self, queues: Sequence[str], timeout: float) -> bool:
        """Sleep up to ``min(timeout, JOBS_POLL)``; True ("claim again") unless the whole
        ``timeout`` passed or the store closed."""
        step = min(max(0.0, timeout), JOBS_POLL)
        deadline = clock.monotonic() + step
        with self._cond:
            while not self._closed:
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    return step < timeout
                self._cond.wait(remaining)
        return False

    def wait_signal(self, owner: str, timeout: float) -> bool:
        """No signals without LISTEN: an owner's first call says "watched" at once, later
        ones sleep ``timeout`` (cut short by close) and say False; the heartbeat decides."""
        with self._cond:
            if owner not in self._signals:
                self._signals[owner] = False
                return True
            deadline = clock.monotonic() + max(0.0, timeout)
            while not self._closed:
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
        return False

    def ready(self) -> bool:
        return True

    def start(self) -> None:
        """Nothing to start: no connection, no thread."""

    def done_ready(self) -> bool:
        return False  # never trust notifications: the waiter polls every poll_every

    def wait_done_ready(self, timeout: float) -> bool:
        """Sleep ``timeout`` (cut short by close); never ready."""
        deadline = clock.monotonic() + max(0.0, timeout)
        with self._cond:
            while not self._closed:
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
        return False


__all__ = ["PollingListener"]
