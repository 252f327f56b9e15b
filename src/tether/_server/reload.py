"""SIGHUP re-reads the token file: add or revoke a token without a restart.

Invariant: a reload never leaves the server with fewer working tokens by accident. A file
that does not load (a typo, a half-written file, a duplicate) keeps the old tokens in force
and logs why, by file and line number (never a token); only a file that loads whole
replaces them, in one swap (:meth:`Authorizer.reload`).

The signal handler only sets a flag: the reload runs on the thread that calls
:meth:`TokenReloader.poll` (the server's main loop), so it never runs inside whatever the
main thread was doing when the signal came (a logging call holding its lock, say).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType

from tether._errors import ConfigError
from tether._server.auth import Authorizer, Tokens

log = logging.getLogger("tether.server")


class TokenReloader:
    """Re-reads ``path`` into ``authorizer`` when asked (:meth:`request`, signal-safe)."""

    def __init__(self, authorizer: Authorizer, path: str,
                 wake: Callable[[], None] | None = None) -> None:
        self.authorizer = authorizer
        self.path = path
        self._wake = wake
        self._asked = False
        self.reloads = 0  # tries so far (tests wait on it)
        self._done = threading.Condition()

    def request(self) -> None:
        """Ask for a reload (what the SIGHUP handler does): sets a flag, wakes the loop."""
        self._asked = True
        if self._wake is not None:
            self._wake()

    def poll(self) -> bool | None:
        """Reload if asked: True when the new file is in force, False when it was refused
        (old tokens kept), None when no reload was asked for."""
        if not self._asked:
            return None
        self._asked = False
        try:
            tokens = Tokens.load(self.path)
        except ConfigError as exc:
            log.error("SIGHUP: token file not reloaded, keeping the old tokens: %s", exc)
            ok = False
        else:
            self.authorizer.reload(tokens)
            counts = tokens.counts()
            log.info("SIGHUP: token file %s reloaded (%s)", self.path,
                     ", ".join(f"{n} {role.value}" for role, n in counts.items()))
            ok = True
        with self._done:
            self.reloads += 1
            self._done.notify_all()
        return ok

    def install(self) -> Callable[[], None]:
        """Route SIGHUP to :meth:`request` (main thread only); returns what undoes it."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handler(_signum: int, _frame: FrameType | None) -> None:
            self.request()

        old = signal.signal(signal.SIGHUP, handler)

        def restore() -> None:
            signal.signal(signal.SIGHUP, old)

        return restore


__all__ = ["TokenReloader"]
