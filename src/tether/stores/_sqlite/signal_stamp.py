"""The signal stamp: a file whose times say "a cancel or a pause was committed" (issue #22).

Why a file: ``wait_for_signal`` used to read the database (a worker's cancel-requested jobs
and the paused set) whenever ``PRAGMA data_version`` moved, that is after every commit of
another connection. During a drain every commit is someone else's, so every worker (busy or
idle) read twice every poll (20 times a second): a drain beside 20 idle workers paid 800
reads a second for signals that almost never come. A cancel or a pause now also touches
``<database>-live/signals`` after its commit, and the poll compares the file's times (one
``stat``, no database read); only a change costs the reads.

Invariants:

* **Bumped after the commit** of the cancel or pause it announces, so a poller that sees the
  new stamp reads the committed state.
* **A lost bump costs latency, never correctness** (the contract's rule for signals): a
  process killed between its commit and its bump, or a canceller of an older release, leaves
  the cancel to the holder's next heartbeat and the pause to the next paused-set read.
* **Any change counts**: the stamp is ``(st_mtime_ns, st_ctime_ns, st_ino)``; each bump sets
  the modification time to the current nanosecond and the kernel moves the change time, so
  two bumps never read as one unchanged stamp, and a recreated file has a new inode.
* A database without a directory (in-memory, ``file:`` URLs) has no stamp: the poll falls
  back to ``data_version`` and reads.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time

from tether.stores._sqlite.liveness import live_dir

log = logging.getLogger("tether.store.sqlite")

NAME = "signals"
#: What ``read`` returns while the file does not exist (no signal was ever sent).
NONE = (0, 0, 0)


def stamp_path(db_path: str) -> str | None:
    """The stamp file of database ``db_path`` (None: no directory to put it in)."""
    folder = live_dir(db_path)
    return None if folder is None else os.path.join(folder, NAME)


def read(path: str) -> tuple[int, int, int]:
    """The stamp now: one ``stat``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return NONE
    return st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def bump(path: str) -> None:
    """Announce a committed cancel or pause. Never raises: a failed bump is a lost signal
    (the heartbeat and the paused-set read still carry it, later)."""
    now = time.time_ns()
    try:
        try:
            os.utime(path, ns=(now, now))
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.utime(path, ns=(now, now))
    except OSError as exc:
        log.debug("could not touch the signal stamp %s (%s): workers learn of this cancel "
                  "or pause at their next heartbeat", path, exc)


__all__ = ["NONE", "bump", "read", "stamp_path"]
