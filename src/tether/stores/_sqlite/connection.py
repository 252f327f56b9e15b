"""Connections, write transactions and error mapping for the SQLite store.

One ``sqlite3`` connection per thread (``threading.local``), opened in autocommit mode
(``isolation_level=None``) so the store issues ``BEGIN IMMEDIATE`` / ``COMMIT`` itself; WAL
journal, ``synchronous=NORMAL``, a checkpoint every ~40 MB of WAL and a busy timeout, which is
what lets many worker processes on one machine share the file. Every connection is tracked so
``close()`` can close them all. After ``fork`` the child drops (but never closes) the parent's
connections: closing an inherited SQLite handle can disturb the parent's WAL locks.

Text columns are decoded with replacement (a bad row can never fail a read), every
``sqlite3.Error`` leaves as one of tether's errors (a held write lock says so plainly), and the
file's identity is watched so a deleted or replaced database raises ``StoreGone``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, ParamSpec, TypeVar

from tether import _clock as clock
from tether._errors import SchemaError, StoreError, StoreGone, StoreUnavailable

P = ParamSpec("P")
R = TypeVar("R")

_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_BUSY_PHRASES = ("database is locked", "database table is locked", "database is busy")

#: WAL pages after which a commit checkpoints (SQLite's default is 1,000, ~4 MB). A checkpoint
#: copies the WAL into the database and fsyncs both, inside the COMMIT of whichever writer
#: crosses the mark: at 1,000 pages a draining worker paid for one every ~125 claim/finish
#: commits, half of COMMIT's cost (profiled: 150-175 us per commit, 76-80 us at 10,000). Ten
#: times fewer checkpoints, and each page written once per checkpoint however often it changed
#: (the claim index's hot pages change on every claim). Cost: the WAL file grows to ~40 MB, and
#: with synchronous=NORMAL a power loss (not a process crash) may lose the commits since the
#: last checkpoint: up to ~40 MB of them instead of ~4 MB (docs/stores.md).
WAL_AUTOCHECKPOINT = 10_000

#: One lock per database file and process, held for every write transaction (see
#: :meth:`Connections.write`); keyed by absolute path, so two stores on one file share it.
_WRITERS: dict[str, threading.Lock] = {}


def _writer_lock(path: str) -> threading.Lock:
    return _WRITERS.setdefault(path, threading.Lock())  # atomic: str keys, under the GIL


#: Connections inherited across fork: kept referenced forever so the child never finalizes them.
_INHERITED: list[sqlite3.Connection] = []
_POOLS: weakref.WeakSet[Connections] = weakref.WeakSet()


def _decode(data: bytes) -> str:
    """Text as SQLite hands it over, decoded with replacement (U+FFFD for invalid bytes).

    SQLite never checks that TEXT is UTF-8, and another program (or an old bug) may have
    written bytes that are not. The default decoder raises for such a row, and then every claim
    whose RETURNING reaches it, and every listing, fails for good: one bad row would block a
    queue. Replacement makes every row readable; the bad bytes show as U+FFFD."""
    return data.decode("utf-8", "replace")


class Undecodable(Exception):
    """A row read by :func:`fetch_strict` holds text that is not UTF-8 (not a sqlite3.Error:
    the caller undoes its transaction and reads again with replacement)."""


def fetch_strict(conn: sqlite3.Connection, sql: str, params: dict[str, Any]) -> list[Any]:
    """``execute(sql, params).fetchall()`` with CPython's own UTF-8 decoding of text (C, no
    Python call per text value: the claim reads five text columns per job) instead of the
    connection's replacing :func:`_decode`. Raises :class:`Undecodable` for text that is not
    UTF-8: the caller rolls its transaction back and runs it again with :func:`_decode`
    (the rare bad row still never fails a claim)."""
    conn.text_factory = str
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        if "decode" in str(exc):  # "Could not decode to UTF-8 column ..."
            raise Undecodable(str(exc)) from exc
        raise
    finally:
        conn.text_factory = _decode


def map_error(exc: sqlite3.Error, db: Connections | None = None) -> StoreError:
    """Translate a sqlite3 error into tether's tree (the original becomes ``__cause__``)."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    message = str(exc)
    lowered = message.lower()
    # By result code; the text only when there is none (a constraint message naming the
    # locked_by column is a permanent error, never "locked").
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED) or (
        code == 0 and any(phrase in lowered for phrase in _BUSY_PHRASES)
    ):
        return StoreUnavailable(locked_message(message, db))
    if "no such table" in lowered or "no such column" in lowered:
        return SchemaError(f"SQLite schema is missing or old ({message}); run `tether migrate`")
    if isinstance(exc, sqlite3.OperationalError) and (
        "unable to open" in lowered or "disk i/o" in lowered
    ):
        return StoreUnavailable(f"SQLite database is unreachable: {message}")
    return StoreError(f"SQLite error: {message}")


def locked_message(message: str, db: Connections | None) -> str:
    """What "database is locked" means for tether: a writer that does not let go.

    SQLite has one write lock per file and cannot break it or say who holds it; a worker
    paused (SIGSTOP, a debugger, a frozen VM) inside a write holds it until it resumes or dies,
    and meanwhile every writer on the file waits and gives up after its busy timeout."""
    where = f" {db.path}" if db is not None else ""
    waited = f" within busy_timeout={db.busy_timeout:g}s" if db is not None else ""
    return (
        f"SQLite database{where} is locked ({message}): another process holds SQLite's write "
        f"lock and did not release it{waited}. Perhaps a paused (SIGSTOP) or hung worker or a "
        "long transaction of another program; SQLite cannot tell which process (PID unknown). "
        "Reads still work; writes resume when that process continues or exits"
    )


def guarded(fn: Callable[P, R]) -> Callable[P, R]:
    """Map ``sqlite3.Error`` raised by ``fn`` (a store method) to tether's exceptions."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except sqlite3.Error as exc:
            db = getattr(args[0], "_db", None) if args else None
            raise map_error(exc, db if isinstance(db, Connections) else None) from exc

    return wrapper


class Connections:
    """Per-thread connections to one database file, and a watch on that file's identity.

    The file is identified by ``(st_dev, st_ino)`` when the first connection opens it. An
    open SQLite handle keeps working on a file that was deleted or replaced (a restored
    backup, a ``rm`` of the database, a new ``tether.db`` created by a producer): the process
    would go on claiming from data nobody else sees. :meth:`check_file` compares the path's
    identity with the recorded one, at most once per ``check_interval`` seconds (one
    ``stat``), and from then on every call raises :class:`StoreGone`.
    """

    def __init__(self, path: str, busy_timeout: float, check_interval: float = 1.0) -> None:
        #: Absolute, so a later ``chdir`` neither breaks new connections nor the file check.
        self.path = os.path.abspath(path)
        self.busy_timeout = busy_timeout
        self.check_interval = check_interval
        self._local = threading.local()
        self._lock = threading.Lock()
        #: Every open connection with the thread that owns it.
        self._all: list[tuple[sqlite3.Connection, weakref.ref[threading.Thread]]] = []
        self._closed = False
        self._identity: tuple[int, int] | None = None
        self._next_check = 0.0
        self._gone: str | None = None
        self._writer = _writer_lock(self.path)
        _POOLS.add(self)

    def get(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or self._closed:
            if conn is not None:  # closed meanwhile: close(), in another thread, left it to us
                self._local.conn = None
                conn.close()
            conn = self._open()
        else:
            self.check_file()
        return conn

    def check_file(self, *, force: bool = False) -> None:
        """Raise StoreGone when the path no longer names the file this store opened.

        Cheap: one ``stat`` at most once per ``check_interval`` (callers are claim, heartbeat,
        every store call through :meth:`get`, and wait_for_jobs' poll loop)."""
        if self._gone is not None:
            raise StoreGone(self._gone)
        if self._identity is None:
            return
        now = clock.monotonic()
        if not force and now < self._next_check:
            return
        self._next_check = now + self.check_interval
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._gone = (
                f"the SQLite database file {self.path} was deleted while this process had it "
                "open: its jobs are gone, and a new file at that path would never be seen here. "
                "Stop this process and start it again on the right file"
            )
            raise StoreGone(self._gone) from None
        except OSError:  # e.g. a permission change: not proof that the file is gone
            return
        if (st.st_dev, st.st_ino) != self._identity:
            self._gone = (
                f"the SQLite database file {self.path} was replaced by another file while this "
                "process had it open (a restored copy or a new database at the same path): "
                "this process still sees the old one. Stop it and start it again"
            )
            raise StoreGone(self._gone)

    def _open(self) -> sqlite3.Connection:
        # Never let a new thread's connection create a fresh, empty file in place of a
        # deleted one: check (forced) before connecting, record the identity after.
        self.check_file(force=True)
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
            conn.text_factory = _decode
            entry = (conn, weakref.ref(threading.current_thread()))
            self._all.append(entry)
        try:
            self._enable_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT}")
            if self._identity is None:  # the file exists now: WAL mode was read or written
                st = os.stat(self.path)
                self._identity = (st.st_dev, st.st_ino)
                self._next_check = clock.monotonic() + self.check_interval
        except (sqlite3.Error, OSError) as exc:
            with self._lock:
                self._all.remove(entry)
            conn.close()
            if isinstance(exc, OSError):
                raise StoreUnavailable(f"SQLite database {self.path}: {exc}") from exc
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
                if map_error(exc, self).__class__ is not StoreUnavailable:
                    raise
                if clock.monotonic() >= deadline:
                    raise
            clock.sleep(pause)
            pause = min(pause * 2, 0.05)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: the write lock is taken up front, so the
        transaction never upgrades a read lock (the classic SQLite deadlock) and every read
        inside it sees the state its write will change.

        Callers run statements only inside it: parameters (JSON batches, tokens) are built
        before and results (Jobs, leases) after, so the one write lock of the file is held for
        the statements alone. A process paused while it holds the lock stops every writer on
        the file (SQLite cannot break it), so the window must be as short as possible.

        The threads of one process (a worker's fetcher, completer, heartbeater) take turns on
        a lock of this process first, so they wait for each other's writes on a lock that
        hands over the moment it is free. SQLite's own wait (the busy handler) sleeps 1, 2,
        5, 10 ms... between tries: a finish arriving during a 3 ms claim slept 3 ms, one
        arriving during a 4 ms claim 8 ms, and a loaded machine, which stretches every
        transaction, made those sleeps longer still. Other processes still wait in the busy
        handler; this lock only orders what SQLite serialises anyway."""
        conn = self.get()
        if not self._writer.acquire(timeout=self.busy_timeout):
            raise StoreUnavailable(
                f"SQLite database {self.path}: another thread of this process held a write "
                f"transaction for longer than busy_timeout={self.busy_timeout:g}s")
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        finally:
            self._writer.release()

    def data_version(self) -> int:
        """Changes whenever another connection commits to the file."""
        row = self.get().execute("PRAGMA data_version").fetchone()
        return int(row[0])

    def close(self) -> None:
        """Close this thread's connection and those of ended threads; a connection another
        live thread owns is left to it (closed at its next call, or when the thread ends).

        Why: closing a connection from one thread while its owner is inside a call on it
        frees what that call is still using, and CPython's sqlite3 crashes the process
        (a segfault, seen when a store was closed while an async producer's waiter polled).
        """
        me = threading.current_thread()
        with self._lock:
            self._closed = True
            conns, self._all = self._all, []
        for conn, ref in conns:
            owner = ref()
            if owner is not None and owner is not me and owner.is_alive():
                continue  # its owner may be stepping a statement right now
            try:
                conn.close()
            except sqlite3.Error:  # pragma: no cover - closing is best effort
                pass

    def _after_fork(self) -> None:
        _INHERITED.extend(conn for conn, _ in self._all)
        self._all = []
        self._local = threading.local()
        self._lock = threading.Lock()
        self._writer = _writer_lock(self.path)  # a fresh one: _reset_after_fork cleared them


def _alive(ref: weakref.ref[threading.Thread]) -> bool:
    thread = ref()
    return thread is not None and thread.is_alive()


def _reset_after_fork() -> None:
    # A writer lock held by a parent thread at the fork would stay held in the child forever.
    _WRITERS.clear()
    for pool in list(_POOLS):
        pool._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
