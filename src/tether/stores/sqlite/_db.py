"""Connections, write transactions and error mapping for the SQLite store.

One ``sqlite3`` connection per thread (``threading.local``), opened in autocommit mode
(``isolation_level=None``) so the store issues ``BEGIN IMMEDIATE`` / ``COMMIT`` itself; WAL
journal, ``synchronous=NORMAL`` and a busy timeout, which is what lets many worker processes on
one machine share the file. Every connection is tracked so ``close()`` can close them all. After
``fork`` the child drops (but never closes) the parent's connections: closing an inherited
SQLite handle can disturb the parent's WAL locks.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import ParamSpec, TypeVar
from urllib.parse import unquote, urlsplit

from tether import clock
from tether.errors import ConfigError, SchemaError, StoreError, StoreUnavailable

P = ParamSpec("P")
R = TypeVar("R")

_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6

#: Connections inherited across fork: kept referenced forever so the child never finalizes them.
_INHERITED: list[sqlite3.Connection] = []
_POOLS: weakref.WeakSet[Connections] = weakref.WeakSet()


def parse_url(url: str) -> str:
    """``sqlite:///relative.db`` → ``relative.db``; ``sqlite:////abs/x.db`` → ``/abs/x.db``."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite":
        raise ConfigError(f"not a SQLite URL: {url!r} (use sqlite:///path.db)")
    if parts.netloc or not parts.path.startswith("/") or len(parts.path) < 2:
        raise ConfigError(
            f"malformed SQLite URL {url!r}: use sqlite:///relative.db or sqlite:////abs/path.db"
        )
    if parts.query or parts.fragment:
        raise ConfigError(f"SQLite URL {url!r} takes no query string; pass options as arguments")
    path = unquote(parts.path[1:])
    if path == ":memory:" or path.startswith("file:"):
        raise ConfigError(
            f"{url!r}: the SQLite store needs a file (workers share it across processes)"
        )
    return path


def map_error(exc: sqlite3.Error) -> StoreError:
    """Translate a sqlite3 error into tether's tree (the original becomes ``__cause__``)."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    message = str(exc)
    lowered = message.lower()
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED) or "locked" in lowered or "busy" in lowered:
        return StoreUnavailable(f"SQLite database is busy: {message}")
    if "no such table" in lowered:
        return SchemaError(f"SQLite schema is missing ({message}); run migrate first")
    if isinstance(exc, sqlite3.OperationalError) and (
        "unable to open" in lowered or "disk i/o" in lowered
    ):
        return StoreUnavailable(f"SQLite database is unreachable: {message}")
    return StoreError(f"SQLite error: {message}")


def guarded(fn: Callable[P, R]) -> Callable[P, R]:
    """Map ``sqlite3.Error`` raised by ``fn`` to tether's exceptions."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except sqlite3.Error as exc:
            raise map_error(exc) from exc

    return wrapper


class Connections:
    """Per-thread connections to one database file."""

    def __init__(self, path: str, busy_timeout: float) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        #: Every open connection with the thread that owns it.
        self._all: list[tuple[sqlite3.Connection, weakref.ref[threading.Thread]]] = []
        self._closed = False
        _POOLS.add(self)

    def get(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or self._closed:
            conn = self._open()
        return conn

    def _open(self) -> sqlite3.Connection:
        with self._lock:
            if self._closed:
                raise StoreError("the SQLite store is closed")
            # Threads come and go: close the connections of threads that have ended.
            dead = [entry for entry in self._all if not _alive(entry[1])]
            for entry in dead:
                self._all.remove(entry)
                entry[0].close()
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=256,
            )
            entry = (conn, weakref.ref(threading.current_thread()))
            self._all.append(entry)
        try:
            self._enable_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error:
            with self._lock:
                self._all.remove(entry)
            conn.close()
            raise
        self._local.conn = conn
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        """Switch the file to WAL (persistent, so usually a no-op). Changing the journal mode
        of a fresh file needs an exclusive lock and SQLite does not run the busy handler for
        it, so processes opening a new file at once retry here within the busy timeout."""
        deadline = clock.monotonic() + self.busy_timeout
        pause = 0.001
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if map_error(exc).__class__ is not StoreUnavailable:
                    raise
                if clock.monotonic() >= deadline:
                    raise
            clock.sleep(pause)
            pause = min(pause * 2, 0.05)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: the write lock is taken up front, so the
        transaction never upgrades a read lock (the classic SQLite deadlock) and every read
        inside it sees the state its write will change."""
        conn = self.get()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def data_version(self) -> int:
        """Changes whenever another connection commits to the file."""
        row = self.get().execute("PRAGMA data_version").fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._all = self._all, []
        for conn, _ in conns:
            try:
                conn.close()
            except sqlite3.Error:  # pragma: no cover - closing is best effort
                pass

    def _after_fork(self) -> None:
        _INHERITED.extend(conn for conn, _ in self._all)
        self._all = []
        self._local = threading.local()
        self._lock = threading.Lock()


def _alive(ref: weakref.ref[threading.Thread]) -> bool:
    thread = ref()
    return thread is not None and thread.is_alive()


def _reset_after_fork() -> None:
    for pool in list(_POOLS):
        pool._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
