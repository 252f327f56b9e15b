"""LISTEN/NOTIFY wake-ups for idle workers.

Enqueue, retry and :meth:`PostgresStore.notify` send ``pg_notify('<schema>_jobs', queue)``
in SQL (delivered at commit). A waiter blocks on ONE dedicated connection that is not part
of the pool (a pooled connection would be handed to other work and miss notifications), so
wake-up latency is the server's delivery time: milliseconds. A dropped listening connection
is re-opened on the next wait; the wait then reports a (possibly spurious) wake-up because
notifications sent while it was down are lost.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import psycopg
from psycopg import sql

from tether import clock
from tether.errors import StoreUnavailable
from tether.stores.postgres.connect import Conn, Connector, one_line


class Listener:
    """Thread-safe: one waiter at a time uses the connection; notifications for queues the
    current waiter does not want are kept for the next waiter instead of being dropped."""

    def __init__(self, connector: Connector) -> None:
        self._connector = connector
        self._conn: Conn | None = None
        self._lock = threading.Lock()
        self._stash: set[str] = set()
        self._closed = False

    def wait(self, queues: Sequence[str], timeout: float) -> bool:
        wanted = set(queues)
        deadline = clock.monotonic() + max(0.0, timeout)
        if not self._lock.acquire(timeout=max(0.0, timeout)):
            return False
        try:
            if self._stash & wanted:
                self._stash -= wanted
                return True
            conn = self._connection()
            try:
                return self._wait_on(conn, wanted, deadline)
            except psycopg.Error as exc:
                self._drop()
                if self._closed:
                    return False
                try:
                    self._connection()
                except StoreUnavailable as again:
                    raise StoreUnavailable(
                        f"PostgreSQL listening connection lost: {one_line(exc)}"
                    ) from again
                return True
        finally:
            self._lock.release()

    def _wait_on(self, conn: Conn, wanted: set[str], deadline: float) -> bool:
        while True:
            remaining = deadline - clock.monotonic()
            for note in conn.notifies(timeout=max(0.0, remaining)):
                if note.payload in wanted:
                    return True
                self._stash.add(note.payload)
            if remaining <= 0 or clock.monotonic() >= deadline:
                return False

    def _connection(self) -> Conn:
        if self._closed:
            raise StoreUnavailable("the store is closed")
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop()
            conn = self._connector.connect()
            try:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._connector.channel)))
            except psycopg.Error as exc:
                conn.close()
                raise StoreUnavailable(f"cannot LISTEN: {one_line(exc)}") from exc
            self._conn = conn
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    def close(self) -> None:
        self._closed = True
        self._drop()
