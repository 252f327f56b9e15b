"""One thread reads the pipes of every process-pool child (``selectors``).

Why one thread and not one per child: with a thread per child, every message woke its own
thread, which then fought the others and the fetcher for the GIL and the pool's lock (at -c 10
a no-op drain cost about 18 futex calls per job in the worker, against 0.5 with the thread
pool). One reader sleeps in one ``epoll_wait`` and, once awake, reads whatever every ready
child has written, handles it, and lets the pool send new work once for the whole round: the
busier the worker, the more messages per wake-up.

Invariants:

* A child's messages are handled in the order it wrote them, each exactly once, and its end of
  file only after the last of them (``on_end`` runs once per child, after every message), so
  the pool knows exactly which attempt a dead child was running.
* Nothing here blocks but the ``select``: a pipe is read once per round, when the selector says
  it is readable, and ``on_end`` (which reaps the child, up to ``stop_grace``) runs on a thread
  of its own, so a child that lingers after closing its pipe never delays the others.
"""

from __future__ import annotations

import logging
import os
import selectors
import signal
import threading
from collections.abc import Callable

from tether.worker import wire
from tether.worker.children import Child

log = logging.getLogger("tether.pool")
PER_CHILD = bool(os.environ.get("POOL3_PER_CHILD"))


class PipeReader:
    def __init__(
        self,
        on_messages: Callable[[Child, list[wire.Message]], None],
        on_round: Callable[[], None],
        on_end: Callable[[Child], None],
        on_fatal: Callable[[BaseException], None],
    ) -> None:
        self._on_messages = on_messages
        self._on_round = on_round  # after every round that handled a message
        self._on_end = on_end  # a child's pipe is closed: reap it (own thread)
        self._on_fatal = on_fatal
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = -1, -1
        self._lock = threading.Lock()
        self._new: list[Child] = []
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="tether-pool-reader",
                                        daemon=True)

    def start(self) -> None:
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread.start()

    def add(self, child: Child) -> None:
        """Read ``child``'s pipe from now on (any thread)."""
        if PER_CHILD:
            threading.Thread(target=self._run_one, args=(child,), daemon=True,
                             name=f"tether-pool-{child.pid}").start()
            return
        with self._lock:
            self._new.append(child)
        self._wake()

    def close(self, timeout: float) -> None:
        """Stop reading (children still open are no longer watched) and wait for the thread."""
        with self._lock:
            self._closed = True
        self._wake()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _wake(self) -> None:
        with self._lock:  # never a write to a closed (maybe reused) descriptor number
            if self._wake_w < 0:
                return
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass  # full: it wakes anyway

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._closed:
                        break
                    new, self._new = self._new, []
                for child in new:
                    self._selector.register(child.reader.fd, selectors.EVENT_READ, child)
                handled = False
                for key, _ in self._selector.select():
                    child = key.data
                    if child is None:
                        os.read(self._wake_r, 4096)
                        continue
                    handled = self._read(child) or handled
                if handled:
                    self._on_round()
        except BaseException as exc:
            log.critical("process pool reader died", exc_info=True)
            self._on_fatal(exc)
        finally:
            self._selector.close()
            with self._lock:
                fds, self._wake_r, self._wake_w = (self._wake_r, self._wake_w), -1, -1
            for fd in fds:
                os.close(fd)

    def _run_one(self, child: Child) -> None:
        while True:
            more = self._read(child, alone=True)
            if more is None:
                return
            if more:
                self._on_round()

    def _read(self, child: Child, alone: bool = False) -> bool | None:
        """Handle what ``child`` wrote; whether a message was handled."""
        try:
            messages = child.reader.take()
            if messages:
                self._on_messages(child, messages)
            if messages is not None:
                return bool(messages)
        except (OSError, ValueError, KeyError, TypeError, wire.ProtocolError) as exc:
            log.error("child %d: broken pipe protocol (%s); killing it", child.pid, exc)
            child.signal(signal.SIGKILL)
        except Exception as exc:
            log.critical("process pool: handling child %d's messages failed", child.pid,
                         exc_info=True)
            child.signal(signal.SIGKILL)
            self._on_fatal(exc)
        if alone:
            child.reader.close()
            self._on_end(child)
            return None
        self._selector.unregister(child.reader.fd)
        child.reader.close()
        threading.Thread(target=self._on_end, args=(child,), daemon=True,
                         name=f"tether-pool-end-{child.pid}").start()
        return True
