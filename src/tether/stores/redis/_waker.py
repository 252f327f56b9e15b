"""Wake-ups for ``wait_for_jobs`` through Redis pub/sub.

One daemon thread per store holds a dedicated pub/sub connection subscribed to ``{p}:wake``.
Scripts that make jobs due (enqueue, release/retry in finish, reap, retry_failed) and
``notify`` publish the affected queue names there, newline-separated. Each waiting thread
registers its queues and an Event; the listener sets the Events whose queues appear in a
message. After a reconnect every waiter is woken (messages may have been missed meanwhile):
spurious wake-ups are allowed by the contract, missed ones only cost the caller's poll
interval.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence
from typing import Any

import redis

_POLL = 0.2  # how often the listener looks at the stop flag while idle


class Waker:
    def __init__(self, client: redis.Redis, channel: str) -> None:
        self._client = client
        self._channel = channel
        self._lock = threading.Lock()
        self._waiters: dict[int, tuple[frozenset[str], threading.Event]] = {}
        self._ids = itertools.count()
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._subscribed_before = False

    def wait(self, queues: Sequence[str], timeout: float) -> bool:
        deadline = time.monotonic() + max(0.0, timeout)
        self._start()
        # Wait for the subscription first, so a job enqueued from now on cannot be missed.
        self._ready.wait(max(0.0, deadline - time.monotonic()))
        event = threading.Event()
        key = next(self._ids)
        with self._lock:
            self._waiters[key] = (frozenset(queues), event)
        try:
            return event.wait(max(0.0, deadline - time.monotonic()))
        finally:
            with self._lock:
                self._waiters.pop(key, None)

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2.0)

    # -- listener ----------------------------------------------------------------------------
    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name=f"tether-wake:{self._channel}", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        backoff = 0.05
        while not self._stop.is_set():
            pubsub = self._client.pubsub()  # type: ignore[no-untyped-call]
            try:
                pubsub.subscribe(self._channel)
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=_POLL)
                    if message is not None:
                        self._handle(message)
                        backoff = 0.05
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                self._ready.clear()
                self._wake(None)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 1.0)
            finally:
                try:
                    pubsub.close()
                except Exception:  # pragma: no cover - closing a broken connection
                    pass
        self._ready.clear()

    def _handle(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "subscribe":
            if self._subscribed_before:
                self._wake(None)  # (re)connected: whatever was published meanwhile is lost
            self._subscribed_before = True
            self._ready.set()
        elif kind == "message":
            data = message.get("data")
            if isinstance(data, bytes):
                data = data.decode("utf-8", "replace")
            self._wake(frozenset(str(data).split("\n")))

    def _wake(self, queues: frozenset[str] | None) -> None:
        with self._lock:
            for wanted, event in self._waiters.values():
                if queues is None or not wanted or wanted & queues:
                    event.set()
