"""LISTEN/NOTIFY wake-ups for idle workers, kept alive by a background thread.

Enqueue, retry, reap and :meth:`PostgresStore.notify` send ``pg_notify('<schema>_jobs',
queue)`` in SQL (delivered at commit). One dedicated connection, outside the pool (a pooled
connection would be handed to other work and miss notifications), LISTENs for them; a thread
of the store reads it and files each notification under its queue, and waiters block on a
condition variable, so wake-up latency is the server's delivery time: milliseconds.

Invariants:

* :meth:`Listener.wait` never raises and never touches the network after the first call: an
  outage of any length is the thread's business, and a waiter only ever sees "woken" or
  "timed out". (It used to raise out of ``wait_for_jobs`` and stop an idle worker.)
* A lost connection is re-opened by the thread at once and then every 50 ms to 0.5 s, so the
  listener is back within about half a second of the server's return.
* Notifications sent while the connection was down are lost, so every re-connection is
  reported as a wake-up to every waiter: an idle worker claims within ~1 s of the server's
  return instead of at its next poll.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import psycopg
from psycopg import sql

from tether import clock
from tether.errors import StoreError
from tether.stores.postgres.connect import Conn, Connector
from tether.stores.postgres.driver_errors import one_line

log = logging.getLogger("tether.store.postgres")

#: How long one read of the connection blocks before the thread checks for close().
_TICK = 0.25
#: Reconnection backoff while the server is unreachable: first retry, growth, ceiling.
_RETRY_FIRST, _RETRY_MAX = 0.05, 0.5
#: libpq's smallest useful connect_timeout: a black-holed server must not hold the thread
#: (and the server's return) for the pool's longer timeout.
_CONNECT_TIMEOUT = 2


class Listener:
    """Thread-safe: any number of waiters. Notifications for queues nobody waits on right
    now are kept for the next waiter instead of being dropped."""

    def __init__(self, connector: Connector) -> None:
        self._connector = connector
        self._cond = threading.Condition()
        self._stash: set[str] = set()
        self._generation = 0  # bumped on every re-connection after a loss
        self._missed = False  # a re-connection no waiter has been told about yet
        self._closed = False
        self._thread: threading.Thread | None = None
        self._first_attempt = threading.Event()
        self._stop = threading.Event()

    def wait(self, queues: Sequence[str], timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a notification on ``queues`` (or a
        re-connection, which may have hidden one). The first call also waits for the
        listening connection's first attempt, so nothing sent after it returns is missed."""
        wanted = set(queues)
        deadline = clock.monotonic() + max(0.0, timeout)
        self._start()
        with self._cond:
            generation = self._generation
            while not self._closed:
                hit = self._stash & wanted
                if hit:
                    self._stash -= hit
                    return True
                if self._missed or self._generation != generation:
                    self._missed = False
                    return True
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return False

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(_TICK * 4)

    # -- the thread ----------------------------------------------------------------------------
    def _start(self) -> None:
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name=f"tether-listen-{self._connector.channel}",
                    daemon=True)
                self._thread.start()
        self._first_attempt.wait(_CONNECT_TIMEOUT + 1.0)

    def _run(self) -> None:
        conn: Conn | None = None
        delay = _RETRY_FIRST
        lost = False
        try:
            while not self._stop.is_set():
                if conn is None:
                    conn = self._open()
                    self._first_attempt.set()
                    if conn is None:
                        lost = True
                        self._stop.wait(delay)
                        delay = min(delay * 2, _RETRY_MAX)
                        continue
                    delay = _RETRY_FIRST
                    if lost:
                        lost = False
                        log.info("listening connection re-established")
                        with self._cond:
                            self._generation += 1
                            self._missed = True
                            self._cond.notify_all()
                try:
                    # Each notification is filed the moment it arrives (the generator yields as
                    # they come); the timeout only bounds how long close() waits for us.
                    for note in conn.notifies(timeout=_TICK):
                        with self._cond:
                            self._stash.add(note.payload)
                            self._cond.notify_all()
                except psycopg.Error as exc:
                    if not self._stop.is_set():
                        log.warning("listening connection lost (%s); reconnecting", one_line(exc))
                    _close(conn)
                    conn = None
                    lost = True
        finally:
            self._first_attempt.set()
            if conn is not None:
                _close(conn)

    def _open(self) -> Conn | None:
        """A new listening connection, or None while the server cannot be reached."""
        try:
            conn = self._connector.connect(connect_timeout=_CONNECT_TIMEOUT)
        except StoreError as exc:  # StoreUnavailable, or ConfigError-like trouble: retry
            log.debug("listening connection: %s", exc)
            return None
        except Exception as exc:  # e.g. a ConfigError after a password change: keep trying
            log.warning("listening connection: %s", exc)
            return None
        try:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._connector.channel)))
        except psycopg.Error as exc:
            log.warning("cannot LISTEN: %s", one_line(exc))
            _close(conn)
            return None
        return conn


def _close(conn: Conn) -> None:
    try:
        conn.close()
    except psycopg.Error:
        pass


__all__ = ["Listener"]
