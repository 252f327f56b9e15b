"""A worker's start: wait for a store that is not up yet.

Why: a worker is often started together with its database (one ``docker compose up``, a
node's boot, a rolling restart of both). A worker that exits at once on "connection
refused" needs a supervisor to retry it and, without one, stays down; yet once running the
same worker rides out an outage. So the start rides it out too: every
:class:`StoreUnavailable` while opening the store is logged at WARNING (the redacted URL and
the error) and retried with exponential backoff, until the store answers (then the worker
runs normally) or a stop ends the wait (exit 0, nothing was claimed): a SIGTERM/SIGINT, or,
with ``stop=`` (a worker's own :class:`Shutdown`), whatever stops that worker (its signal
handlers, ``Worker.stop()``, a burst's end). A
configuration error (a bad URL, an unknown option, a failed login, a missing database or
SQLite directory) is not an outage and still ends the start at once with one line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from tether import _clock as clock
from tether._backoff import Backoff
from tether._errors import StoreUnavailable
from tether._worker.health import one_line
from tether._worker.shutdown import Shutdown

log = logging.getLogger("tether.worker")
T = TypeVar("T")

#: Pauses between tries: 0.5 s, 1 s, 2 s, ... up to 30 s (a database that takes minutes to
#: come up is tried twice a minute; one that is back is found within a second or two).
START_BACKOFF = Backoff(base=0.5, factor=2.0, max=30.0, jitter=0.1)
#: How often the wait looks at the stop flag (a signal's handler runs on the main thread).
SIGNAL_CHECK_EVERY = 0.2
#: A stop's log line during the wait.
WAIT_STOPPED = "no longer waiting for the store (nothing was claimed)"


def open_when_up(attempt: Callable[[], T], shown: str, *, stop: Shutdown | None = None,
                 backoff: Backoff = START_BACKOFF) -> T | None:
    """``attempt()`` until it does not raise StoreUnavailable; None when a stop came first.
    ``shown``: the store URL without its password, for the log lines. ``stop``: the caller's
    Shutdown, whose signal handlers the caller installs (a worker: so that the same SIGTERM
    that ends the wait is not lost between the wait and the run); without it, SIGTERM/SIGINT
    are routed to a Shutdown of this wait's own for its length."""
    shutdown = stop if stop is not None else Shutdown()
    restore = shutdown.install() if stop is None else (lambda: None)
    # While waiting, a signal drains nothing: its line says so (not "draining in-flight jobs,
    # waiting up to shutdown_timeout", which would send an operator looking for jobs).
    said, shutdown.draining = shutdown.draining, WAIT_STOPPED
    try:
        failures = 0
        while not shutdown.stopping:
            try:
                return attempt()
            except StoreUnavailable as exc:
                failures += 1
                pause = backoff.delay(failures)
                if shutdown.stopping:
                    break
                log.warning("store unavailable at %s (%s), retrying in %.1f s (try %d; "
                            "stop with SIGTERM or Ctrl-C)", shown, one_line(exc), pause,
                            failures)
            until = clock.monotonic() + pause
            while not shutdown.stopping and clock.monotonic() < until:
                shutdown.changed.wait(min(SIGNAL_CHECK_EVERY, until - clock.monotonic()))
        log.info("stopped before the store at %s was reached", shown)
        return None
    finally:
        shutdown.draining = said
        restore()
