"""Death detection on the SQLite store (the :class:`~tether.stores._contract.Liveness` role).

Invariants:

* **A token is a ``flock`` on a per-worker file** in ``<database>-live/``, held by the worker
  process on an open file description that only its death (or ``release_liveness``) closes:
  the kernel drops the lock then, and not before, so a paused or hung process keeps it.
  ``flock``, not ``fcntl``/``lockf``: POSIX record locks belong to the *process*, so a checker
  in the holder's own process (the maintainer thread of the worker) would get the lock and
  see a false death; ``flock`` locks conflict between open file descriptions, even in one
  process.
* **A file exists only locked.** The token file is created under a temporary name, locked,
  then renamed into place, so a checker never sees a new worker's file before its lock.
* **A check is a non-blocking shared ``flock``** on a fresh descriptor: refused while the
  holder lives, granted once it is gone (then released at once).
* **No file, no token**: a worker that never took one (an older release) is never dead.
  A dead worker whose jobs were all taken back has its file renamed to ``.reaped``: it is
  still dead (for ``dead_workers`` and leader holders) but no longer checked every round.
* An in-memory or ``file:`` URL has no path to put files beside: the lease alone decides.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from tether import _clock as clock
from tether._errors import StoreUnavailable
from tether.stores._contract import REAPED_ERROR, DeadOwners, Leadership, Reaped
from tether.stores._liveness import holder_worker
from tether.stores._sqlite.connection import Connections, guarded
from tether.stores._sqlite.links import resolve
from tether.stores._sqlite.rows import LIVE, store_now

LOCKED = ".lock"
REAPED = ".reaped"
#: Why an in-memory database cannot detect death (``capabilities.liveness_why_not``).
NO_PATH = "an in-memory or file: SQLite URL has no directory for lock files"

#: Tokens this process holds: token file path -> open descriptor (the lock lives on it).
_held: dict[str, int] = {}
_held_lock = threading.Lock()


def live_dir(path: str) -> str | None:
    """The lock-file directory of database ``path`` (None: no file to put it beside)."""
    if path == ":memory:" or path.startswith("file:"):
        return None
    return f"{path}-live"


def _file(folder: str, worker_id: str, suffix: str) -> str:
    return os.path.join(folder, quote(worker_id, safe="") + suffix)


def _free(path: str) -> bool | None:
    """True when nobody holds the token file's lock (its holder is gone), False while one
    does, None when there is no such file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops the shared lock we may have taken
    return True


def _dead(folder: str, worker_id: str) -> bool:
    if os.path.exists(_file(folder, worker_id, REAPED)):
        return True
    return _free(_file(folder, worker_id, LOCKED)) is True


class SQLiteLiveness:
    """The :class:`~tether.stores._contract.Liveness` role of :class:`SQLiteStore`."""

    _db: Connections
    path: str

    if TYPE_CHECKING:
        def notify(self, queues: Sequence[str]) -> None: ...  # SQLiteLeases'

        def _announce_finished(self) -> None: ...  # SQLiteProducer's

        def leader_get(self, name: str) -> Leadership | None: ...  # SQLiteMaintenance's

    def take_liveness(self, worker_id: str) -> bool:
        folder = live_dir(self.path)
        if folder is None:
            return False
        final = _file(folder, worker_id, LOCKED)
        with _held_lock:
            if final in _held:
                return True
            try:
                os.makedirs(folder, exist_ok=True)
                temp = os.path.join(folder, f".{os.getpid()}.{threading.get_ident()}.tmp")
                fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    os.replace(temp, final)  # visible only once locked
                except BaseException:
                    os.close(fd)
                    with contextlib.suppress(OSError):
                        os.unlink(temp)
                    raise
            except OSError as exc:
                raise StoreUnavailable(f"could not take the liveness token in {folder}: "
                                       f"{exc}") from exc
            _held[final] = fd
        return True

    def release_liveness(self, worker_id: str) -> None:
        folder = live_dir(self.path)
        if folder is None:
            return
        with _held_lock:
            fd = _held.pop(_file(folder, worker_id, LOCKED), None)
        if fd is not None:
            os.close(fd)  # the lock goes with it: from now on the worker counts as dead

    @guarded
    def dead_owners(self, elections: Sequence[str] = ()) -> DeadOwners:
        folder = live_dir(self.path)
        if folder is None:
            return DeadOwners()
        workers: list[str] = []
        try:
            entries = os.listdir(folder)
        except FileNotFoundError:
            entries = []
        for entry in entries:
            if entry.endswith(LOCKED) and _free(os.path.join(folder, entry)):
                workers.append(unquote(entry[:-len(LOCKED)]))
        leaders: list[Leadership] = []
        if not workers and not any(entry.endswith(REAPED) for entry in entries):
            return DeadOwners()  # nobody is dead: no leader can be (no read of the database)
        for name in elections:
            lead = self.leader_get(name)
            if lead is not None and _dead(folder, holder_worker(lead.holder)):
                leaders.append(lead)
        return DeadOwners(tuple(sorted(workers)), tuple(leaders))

    def dead_workers(self, worker_ids: Sequence[str]) -> frozenset[str]:
        folder = live_dir(self.path)
        if folder is None:
            return frozenset()
        return frozenset(w for w in worker_ids if _dead(folder, w))

    @guarded
    def reap_dead(
        self, owners: Sequence[str], *, now: float | None = None, limit: int = 1000
    ) -> list[Reaped]:
        folder = live_dir(self.path)
        if folder is None or limit <= 0 or not owners:
            return []
        released = False
        with self._db.write() as conn:
            t = store_now(conn, now)
            rows = conn.execute(LIVE["reap_dead"], {
                "owners": json.dumps(list(owners)), "limit": limit, "now": t,
                "error": REAPED_ERROR}).fetchall()
            ended = [[row[0], row[3]] for row in rows if row[5] and row[3] != "pending"]
            if ended:  # jobs the reap ended that have children (links.py)
                released, _ = resolve(conn, ended, t)
        reaped = sorted((Reaped(r[0], r[1], r[2], r[3], r[4]) for r in rows),
                        key=lambda r: r.job_id)
        if released or any(r.status == "pending" for r in reaped):
            self.notify(())
        if any(r.status != "pending" for r in reaped):
            self._announce_finished()
        if len(rows) < limit:  # every job of these owners is back: stop checking them
            for owner in owners:
                locked = _file(folder, owner, LOCKED)
                if _free(locked):
                    with contextlib.suppress(OSError):
                        os.replace(locked, _file(folder, owner, REAPED))
                        os.utime(_file(folder, owner, REAPED))  # forget_reaped's clock
        return reaped

    def forget_reaped(self, older_than: float) -> int:
        """Delete ``.reaped`` token files older than ``older_than`` seconds (their workers'
        rows go with ``delete_dead_workers``). Returns how many went."""
        folder = live_dir(self.path)
        if folder is None:
            return 0
        cutoff, gone = clock.wall() - older_than, 0
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(folder):
                if entry.name.endswith(REAPED) and entry.stat().st_mtime < cutoff:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
                        gone += 1
        return gone


__all__ = ["LOCKED", "NO_PATH", "REAPED", "SQLiteLiveness", "live_dir"]
