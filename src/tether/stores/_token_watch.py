"""A liveness token held on a dedicated connection, and the watcher that re-takes it (issue
#22): what the PostgreSQL and Redis stores share.

Invariants:

* The token is the connection itself (or a session lock on it): the server drops it when the
  process dies and its socket closes, and not before. The watcher never sends a query of its
  own on a healthy connection unless the store asks for a keep-alive (Redis with an idle
  ``timeout``), so a token costs the server nothing while the worker lives.
* When the server closes the connection while the process lives (a restart, a network cut,
  an operator's kill), the watcher takes a new token at once and every ``RETAKE_EVERY``
  seconds until it has one. Between the cut and the re-take the worker looks dead: the
  false-death case of docs/guarantees.md (its jobs run again elsewhere, fenced).
* ``release`` ends the token as death would: from then on the worker counts as dead.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

__all__ = ["RETAKE_EVERY", "WATCH_EVERY", "HeldToken"]

log = logging.getLogger("tether.store")

#: How often the watcher looks at a quiet token connection (a wait on its socket, no query).
WATCH_EVERY = 1.0
#: Pause between attempts to re-take a token whose connection was cut.
RETAKE_EVERY = 0.1


class HeldToken:
    """One held token: a subclass says how to take it (``_take``), how to wait on its quiet
    connection (``_quiet``, which raises once the server closed it) and how to drop it."""

    conn: Any

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self._stop = threading.Event()
        self.conn = self._take()
        self._watcher = threading.Thread(target=self._watch, daemon=True,
                                         name="tether-liveness")
        self._watcher.start()

    def _take(self) -> Any:
        """Open a dedicated connection and take the token on it (raises when it cannot)."""
        raise NotImplementedError

    def _quiet(self) -> None:
        """Wait up to about WATCH_EVERY on the connection; raise once the server closed it."""
        raise NotImplementedError

    def _drop(self) -> None:
        """Close the connection (never raises)."""
        raise NotImplementedError

    def _give_up(self) -> None:
        """Give the token up before closing (a no-op where closing is giving up)."""

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                self._quiet()
                continue
            except Exception:
                pass
            if self._stop.is_set():
                return
            log.warning("the liveness token connection of %s was cut; taking the token "
                        "again (until then the worker may be judged dead, and its jobs run "
                        "again elsewhere, fenced)", self.worker_id)
            self._drop()
            while not self._stop.is_set():
                try:
                    self.conn = self._take()
                    log.info("liveness token of %s taken again", self.worker_id)
                    break
                except Exception as exc:
                    log.debug("could not take the liveness token again: %s", exc)
                    self._stop.wait(RETAKE_EVERY)

    def release(self) -> None:
        self._stop.set()
        with contextlib.suppress(Exception):
            self._give_up()
        self._drop()  # the server sees the connection close: from now on, dead
        if self._watcher is not threading.current_thread():
            self._watcher.join(WATCH_EVERY + 1.0)
