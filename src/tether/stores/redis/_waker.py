"""Wake-ups for ``wait_for_jobs`` through Redis pub/sub.

One daemon thread per store holds a dedicated pub/sub connection subscribed to ``{p}:wake``.
Scripts that make jobs due (enqueue, release/retry in finish, reap, retry_failed) and
``notify`` publish the affected queue names there, newline-separated. Each waiting thread
registers its queues and an Event; the listener sets the Events whose queues appear in a
message. After a reconnect every waiter is woken (messages may have been missed meanwhile):
spurious wake-ups are allowed by the contract, missed ones only cost the caller's poll
interval.

No wake-up is lost between a claim and the wait that follows it: the fetcher's loop is "claim
(nothing due), then wait", and a job enqueued while the empty claim's reply travels back
publishes before the wait has registered. So every wake-up bumps a sequence number and records
it per queue; ``mark()`` (called just before a claim) returns the current number, and
``wait(..., since=mark)`` returns at once when a wake-up for its queues (or a (re)subscription,
after which anything may have been missed) came after the mark.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

_POLL = 0.2  # how often the listener looks at the stop flag while idle


class Waker:
    def __init__(
        self, client: redis.Redis, channel: str, on_reconnect: Callable[[], None] | None = None
    ) -> None:
        self._client = client
        self._on_reconnect = on_reconnect  # told when the subscription came back after a loss
        self._channel = channel
        self._lock = threading.Lock()
        self._waiters: dict[int, tuple[frozenset[str], threading.Event]] = {}
        self._ids = itertools.count()
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._subscribed_before = False
        self._seq = 0  # bumped by every wake-up and (re)subscription
        self._any = 0  # seq of the last event that may concern every queue
        self._last: dict[str, int] = {}  # queue -> seq of the last wake-up naming it

    def mark(self) -> int:
        """The current wake-up sequence number (starts the listener if it is not running)."""
        self._start()
        with self._lock:
            return self._seq

    def _woken_since(self, queues: frozenset[str], since: int) -> bool:
        if self._any > since:
            return True
        if not queues:
            return self._seq > since
        return any(self._last.get(q, 0) > since for q in queues)

    def wait(self, queues: Sequence[str], timeout: float, since: int | None = None) -> bool:
        deadline = time.monotonic() + max(0.0, timeout)
        self._start()
        # Wait for the subscription first, so a job enqueued from now on cannot be missed.
        self._ready.wait(max(0.0, deadline - time.monotonic()))
        event = threading.Event()
        key = next(self._ids)
        wanted = frozenset(queues)
        with self._lock:
            if since is not None and self._woken_since(wanted, since):
                return True
            self._waiters[key] = (wanted, event)
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
            except Exception:
                # Connection trouble (or anything else): wake every waiter (it will poll),
                # then resubscribe; capped at 1 s so wake-ups resume soon after an outage.
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
                if self._on_reconnect is not None:
                    self._on_reconnect()
            else:
                self._bump(None)  # a claim marked before this may have missed a wake-up
            self._subscribed_before = True
            self._ready.set()
        elif kind == "message":
            data = message.get("data")
            if isinstance(data, bytes):
                data = data.decode("utf-8", "replace")
            self._wake(frozenset(str(data).split("\n")))

    def _bump(self, queues: frozenset[str] | None) -> None:
        with self._lock:
            self._seq += 1
            if queues is None:
                self._any = self._seq
            else:
                for q in queues:
                    self._last[q] = self._seq

    def _wake(self, queues: frozenset[str] | None) -> None:
        self._bump(queues)
        with self._lock:
            for wanted, event in self._waiters.values():
                if queues is None or not wanted or wanted & queues:
                    event.set()
