"""The threads that read process-pool children's pipes: one per child, each read taking every
message that has arrived.

One thread per child, not one ``selectors`` thread for all: both were measured (SQLite no-op
drains, -c 2 and -c 10, session 4). One thread polling every pipe cut the futex calls per job
but lowered the drain rate on the shared machine: its every ``epoll_wait`` and ``os.read``
gives up the GIL and waits for it behind the busy fetcher (up to the 5 ms switch interval),
one pipe after another, where a thread per child waits for it side by side.

Invariants:

* A child's messages are handled in the order it wrote them, each exactly once, and its end
  of file only after the last of them (``on_end`` runs once per child, after every message),
  so the pool knows exactly which attempt a dead child was running.
* A pipe protocol error, or a failure while handling a child's message, kills that child (its
  end then goes the usual way); the latter also reports the worker's fatal error.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable

from tether._worker.processes import wire
from tether._worker.processes.children import Child

log = logging.getLogger("tether.pool")


class PipeReader:
    def __init__(
        self,
        on_messages: Callable[[Child, list[wire.Message]], None],
        on_read: Callable[[], None],
        on_end: Callable[[Child], None],
        on_fatal: Callable[[BaseException], None],
    ) -> None:
        self._on_messages = on_messages
        self._on_read = on_read  # after every read that handled a message: send more work
        self._on_end = on_end  # the child's pipe is closed: reap it
        self._on_fatal = on_fatal

    def add(self, child: Child) -> None:
        """Read ``child``'s pipe from now on, until its end of file."""
        threading.Thread(target=self._run, args=(child,), daemon=True,
                         name=f"tether-pool-{child.pid}").start()

    def _run(self, child: Child) -> None:
        try:
            while self._read(child):
                pass
        except BaseException as exc:
            log.critical("process pool reader of child %d died", child.pid, exc_info=True)
            child.signal(signal.SIGKILL)
            self._on_fatal(exc)
        finally:
            child.reader.close()
            self._on_end(child)

    def _read(self, child: Child) -> bool:
        """Wait for what ``child`` writes and handle all that has arrived; False at its end."""
        try:
            messages = child.reader.take()
            if messages is None:
                return False
            if messages:
                self._on_messages(child, messages)
                self._on_read()
            return True
        except (OSError, ValueError, KeyError, TypeError, wire.ProtocolError) as exc:
            log.error("child %d: broken pipe protocol (%s); killing it", child.pid, exc)
            child.signal(signal.SIGKILL)
        except Exception as exc:
            log.critical("process pool: handling child %d's messages failed", child.pid,
                         exc_info=True)
            child.signal(signal.SIGKILL)
            self._on_fatal(exc)
        return False
