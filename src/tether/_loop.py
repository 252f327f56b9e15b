"""A background loop: rounds on one named daemon thread until it is stopped.

The worker's side loops (fetcher, heartbeat, lease watch, completer, deadlines, the process
pool's supervisor, a burst's idle watch) and the maintainer are all one of these: they differ
in what one round does and in when the next one comes, not in how they start, stop and fail.

Invariants:

* One thread per loop, named (a thread dump names every loop) and daemon (a loop stuck in a
  store call never holds the process open at exit).
* No exception from a round ends a loop unseen. A loop either survives it (:meth:`Loop.failed`
  says when to try again) or dies of it: :meth:`Loop.died` logs it with its traceback and hands
  it to ``on_fatal``, once (a worker stops rather than run on without a loop it relies on), or,
  with no ``on_fatal``, raises it on the loop's thread. Failing *store calls* never reach here:
  each round classifies and survives them itself (``tether/_worker/health.py``), because the
  lease protocol, not the process, keeps the jobs safe while the store is away.
* :meth:`Loop.stop` is idempotent and callable from any thread, and wakes the loop at once
  (its stop event, and :meth:`Loop.wake` for a loop that waits on something else); ``join``
  never waits for the calling thread itself. :meth:`Loop.finished` runs on the loop's thread
  on its way out, whatever ended it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable


class Loop:
    def __init__(
        self,
        name: str,
        *,
        log: logging.Logger,
        died: str,
        on_fatal: Callable[[BaseException], None] | None = None,
        first_wait: float = 0.0,
        stop_wait: float = 5.0,
    ) -> None:
        """``name``: the thread's. ``died``: the line logged (CRITICAL, with the traceback)
        when a round's exception ends the loop. ``first_wait``: seconds before the first
        round. ``stop_wait``: how long :meth:`stop` waits for the thread unless told."""
        self.name = name
        self.first_wait = first_wait
        self.stop_wait = stop_wait
        self._loop_log = log
        self._died_line = died
        self._loop_fatal = on_fatal
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.run, name=name, daemon=True)

    # -- what a loop defines -----------------------------------------------------------------
    def round(self) -> float:
        """One round; returns the seconds to wait before the next (0: at once). A round that
        waits for its own work (a queue, a condition) returns 0."""
        raise NotImplementedError

    def failed(self, exc: Exception) -> float:
        """A round raised ``exc``: return the seconds before the next round to survive it;
        raise to die of it (the default)."""
        raise exc

    def wake(self) -> None:
        """Called by :meth:`stop` after setting the stop event: wake a loop that waits on
        something other than it (a queue, a condition)."""

    def finished(self) -> None:
        """Runs on the loop's thread as it ends, however it ends."""

    @property
    def stopping(self) -> bool:
        """Checked before every round: True ends the loop."""
        return self._stop.is_set()

    # -- running it ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Ask the loop to end after its current round; wait for it up to ``timeout``
        seconds (``stop_wait`` when None; 0: not at all)."""
        self._stop.set()
        self.wake()
        self.join(self.stop_wait if timeout is None else timeout)

    def join(self, timeout: float | None) -> None:
        thread = self._thread
        if thread.is_alive() and threading.current_thread() is not thread:
            thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def run(self) -> None:
        """The loop, on the calling thread (``start`` runs it on the loop's own); returns once
        stopped."""
        try:
            wait = self.first_wait
            while True:
                if wait > 0:
                    self._stop.wait(wait)
                if self.stopping:
                    return
                try:
                    wait = self.round()
                except Exception as exc:
                    wait = self.failed(exc)
        except BaseException as exc:
            self.died(exc)
        finally:
            self.finished()

    def died(self, exc: BaseException) -> None:
        """A round's exception ended the loop (called inside the ``except`` that caught it)."""
        self._loop_log.critical(self._died_line, exc_info=True)
        if self._loop_fatal is None:
            raise exc
        self._loop_fatal(exc)
