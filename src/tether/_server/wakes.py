"""The wake hub: long-poll calls wait on the event loop, one store waiter per key.

Invariants:

* However many clients wait, the server runs at most one blocking store wait per distinct
  key (a queue set for ``wait_for_jobs``, a job-id set for ``wait_for_finish``), on a thread
  of its own, and no waiting call holds a thread or a store connection: each is a future on
  the server's event loop. When the store waiter is woken, every call waiting on its key at
  that moment is woken (spurious wake-ups are allowed by the contract).
* No wake-up is lost between two waits of one client: each key counts its wake-ups (its
  generation) and a reply carries a *mark* (hub epoch and generation); a wait that brings
  back a mark older than the key's generation returns at once. A key's store waiter lingers
  ``linger`` seconds after its last call so the count goes on between a worker's waits (its
  claims happen there). A mark of another hub (another server, or this one before a
  restart) is ignored: a missed wake-up only costs latency, callers poll on timeout.
* ``close`` ends every wait at once (a stopping server answers its long polls).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Hashable

__all__ = ["LINGER", "SLICE", "WakeHub"]

log = logging.getLogger("tether.server")

#: Longest blocking store wait a key's waiter makes before it looks whether calls remain.
SLICE = 1.0
#: How long a queue set's store waiter keeps counting wake-ups after its last call left.
LINGER = 10.0


class _Group:
    """The calls waiting on one key, its store waiter thread, and its wake-up count."""

    def __init__(self) -> None:
        self.futures: set[asyncio.Future[bool]] = set()
        self.thread: threading.Thread | None = None
        self.generation = 0
        self.idle_since = time.monotonic()


class WakeHub:
    def __init__(self, loop: asyncio.AbstractEventLoop, *, slice_: float = SLICE) -> None:
        self._loop = loop
        self._slice = slice_
        self._lock = threading.Lock()
        self._groups: dict[Hashable, _Group] = {}
        self._closed = False
        self.epoch = os.urandom(4).hex()

    @property
    def waiters(self) -> int:
        """Store waiter threads running now (what the hub promises to keep small)."""
        return self.running()

    def running(self, kind: str | None = None) -> int:
        """Store waiter threads running now, of keys starting with ``kind`` when given."""
        with self._lock:
            return sum(1 for key, g in self._groups.items() if g.thread is not None and (
                kind is None or (isinstance(key, tuple) and key[:1] == (kind,))))

    def _seen(self, since: str) -> int | None:
        epoch, _, generation = since.partition(":")
        if epoch != self.epoch or not generation.isdigit():
            return None
        return int(generation)

    async def wait(self, key: Hashable, store_wait: Callable[[float], bool], timeout: float,
                   *, since: str = "", linger: float = 0.0) -> tuple[bool, str]:
        """Wait up to ``timeout`` s for ``store_wait`` (a blocking store wait taking its
        timeout) on ``key``'s shared waiter to be woken. (True when woken early, the mark)."""
        if self._closed or timeout <= 0:
            return False, ""
        seen = self._seen(since) if since else None
        future: asyncio.Future[bool] = self._loop.create_future()
        with self._lock:
            group = self._groups.setdefault(key, _Group())
            if seen is not None and group.generation > seen:
                return True, f"{self.epoch}:{group.generation}"
            group.futures.add(future)
            if group.thread is None:
                group.thread = threading.Thread(
                    target=self._run, args=(key, group, store_wait, linger), daemon=True,
                    name="tether-wake")
                group.thread.start()
        try:
            woken = await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            woken = False
        finally:
            with self._lock:
                group.futures.discard(future)
                group.idle_since = time.monotonic()
        return woken, f"{self.epoch}:{group.generation}"

    def close(self) -> None:
        """End every wait now (they return False) and refuse new ones."""
        self._closed = True
        with self._lock:
            futures = [f for g in self._groups.values() for f in g.futures]
        for future in futures:
            with contextlib.suppress(RuntimeError):  # the loop is gone
                self._loop.call_soon_threadsafe(_resolve, future, False)

    def _run(self, key: Hashable, group: _Group, store_wait: Callable[[float], bool],
             linger: float) -> None:
        try:
            while not self._closed:
                with self._lock:
                    if (not group.futures
                            and time.monotonic() - group.idle_since >= linger):
                        return
                try:
                    woken = store_wait(self._slice)
                except Exception as exc:  # the store is down: calls time out and poll again
                    log.debug("a wake-up wait failed (%s); waiting calls poll", exc)
                    woken = False
                    threading.Event().wait(self._slice)
                if woken:
                    with self._lock:
                        group.generation += 1
                        futures = list(group.futures)
                    for future in futures:
                        with contextlib.suppress(RuntimeError):  # the loop is gone
                            self._loop.call_soon_threadsafe(_resolve, future, True)
        finally:
            with self._lock:
                group.thread = None
                if self._groups.get(key) is group and not group.futures:
                    del self._groups[key]


def _resolve(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)
