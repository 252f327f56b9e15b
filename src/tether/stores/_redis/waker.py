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

The same subscription listens on ``{p}:done`` for ``wait_for_finish`` (issue #12): finish,
cancel and reap publish the comma-separated ids they ended there. Only while someone waits
(and :data:`DONE_LINGER` seconds after): every finish of the fleet publishes there, and a
worker that never waits for results must not receive them all. A finish waiter registers its
ids and a callback (an Event's ``set``, or an event loop's ``call_soon_threadsafe``), reads
its jobs' status, and if the channel is not subscribed yet pokes the thread (an empty message
on the wake channel, so it need not wait for its read timeout), waits for the subscription and
reads again. The callback runs when a message names one of its ids, or on any loss.

Once a worker waits for signals (``wait_for_signal``, issue #22) the subscription also takes
``{p}:signal``: a cancel of a running job publishes its holder's id there, a pause ``*``. An
owner's first wait returns True once subscribed (its heartbeat covers what came before), and
every loss or re-subscription signals every owner (messages may have been missed).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

import redis

from tether import _clock as clock

_POLL = 0.2  # how often the listener looks at the stop flag while idle
#: Seconds the done channel stays subscribed after its last finish waiter left.
DONE_LINGER = 60.0


class Waker:
    def __init__(
        self, client: redis.Redis, channel: str, on_reconnect: Callable[[], None] | None = None,
        done_channel: str | None = None, signal_channel: str | None = None,
    ) -> None:
        self._client = client
        self._on_reconnect = on_reconnect  # told when the subscription came back after a loss
        self._channel = channel
        self._done_channel = done_channel
        self._signal_channel = signal_channel
        self._signals: dict[str, bool] = {}  # owner -> signalled since its last wait
        self._signal_used = False  # wait_signal was called: subscribe to the signal channel
        self._signal_ready = threading.Event()  # subscribed to it now
        self._signal_cond = threading.Condition(threading.Lock())
        self._finish_waiters: dict[int, tuple[frozenset[int], Callable[[], None]]] = {}
        self._done_keep_until = 0.0  # monotonic: stay subscribed to the done channel until then
        self._done_ready = threading.Event()  # subscribed to the done channel now
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

    # -- signals (wait_for_signal) --------------------------------------------------------------
    def wait_signal(self, owner: str, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a signal to ``owner`` (or to every worker, or
        a loss). An owner's first call returns True once subscribed (False if not within
        ``timeout``)."""
        deadline = time.monotonic() + max(0.0, timeout)
        self._signal_used = True
        self._start()
        with self._signal_cond:
            first = owner not in self._signals
            if first:
                self._signals[owner] = False
        if first:
            if self._signal_ready.wait(max(0.0, deadline - time.monotonic())):
                return True
            with self._signal_cond:  # not listening yet: the next call is a first call again
                self._signals.pop(owner, None)
            return False
        with self._signal_cond:
            while not self._stop.is_set():
                if self._signals.get(owner, False):
                    self._signals[owner] = False
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._signal_cond.wait(remaining)
        return False

    def forget_signals(self, owner: str) -> None:
        with self._signal_cond:
            self._signals.pop(owner, None)

    def _signalled(self, payload: str) -> None:
        with self._signal_cond:
            for owner in self._signals:
                if payload in ("*", owner):
                    self._signals[owner] = True
            self._signal_cond.notify_all()

    # -- finish waiters ------------------------------------------------------------------------
    def ready(self) -> bool:
        """Subscribed now (registering a finish waiter will not miss what follows)."""
        return self._ready.is_set()

    def subscribe_wait(self, timeout: float) -> bool:
        """Start the listener and block up to ``timeout`` for its subscription."""
        self._start()
        return self._ready.wait(max(0.0, timeout))

    def add_finish_waiter(self, ids: Collection[int], callback: Callable[[], None]) -> int:
        """Register before reading the jobs' status; ``callback`` runs on the listener's
        thread. Returns a key for :meth:`remove_finish_waiter`."""
        key = next(self._ids)
        with self._lock:
            self._finish_waiters[key] = (frozenset(ids), callback)
        return key

    def remove_finish_waiter(self, key: int) -> None:
        with self._lock:
            self._finish_waiters.pop(key, None)
            self._done_keep_until = clock.monotonic() + DONE_LINGER

    def done_ready(self) -> bool:
        return self._done_ready.is_set()

    def wait_done_ready(self, timeout: float) -> bool:
        return self._done_ready.wait(max(0.0, timeout))

    def _want_done(self) -> bool:
        with self._lock:
            return bool(self._finish_waiters) or clock.monotonic() < self._done_keep_until

    def _finished(self, ended: frozenset[int] | None) -> None:
        with self._lock:
            woken = [cb for ids, cb in self._finish_waiters.values()
                     if ended is None or ids & ended]
        for callback in woken:
            callback()

    def close(self) -> None:
        self._finished(None)
        self._stop.set()
        with self._signal_cond:
            self._signal_cond.notify_all()
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
            done_on = signal_on = False
            try:
                pubsub.subscribe(self._channel)
                while not self._stop.is_set():
                    if self._signal_channel and self._signal_used and not signal_on:
                        signal_on = True
                        pubsub.subscribe(self._signal_channel)
                    if self._done_channel and self._want_done() != done_on:
                        done_on = not done_on
                        if done_on:
                            pubsub.subscribe(self._done_channel)
                        else:
                            self._done_ready.clear()
                            pubsub.unsubscribe(self._done_channel)
                    message = pubsub.get_message(timeout=_POLL)
                    if message is not None:
                        self._handle(message)
                        backoff = 0.05
            except Exception:
                # Connection trouble (or anything else): wake every waiter (it will poll),
                # then resubscribe; capped at 1 s so wake-ups resume soon after an outage.
                self._ready.clear()
                self._done_ready.clear()
                self._signal_ready.clear()
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
        channel = message.get("channel")
        if isinstance(channel, bytes):
            channel = channel.decode("utf-8", "replace")
        if kind == "message" and channel == self._done_channel:
            self._finished(_ids(message.get("data")))
        elif kind == "message" and channel == self._signal_channel:
            data = message.get("data")
            self._signalled(data.decode("utf-8", "replace") if isinstance(data, bytes)
                            else str(data))
        elif kind == "subscribe" and channel == self._signal_channel:
            self._signal_ready.set()
        elif kind == "subscribe" and channel != self._channel:
            self._done_ready.set()  # the done channel's; the wake channel's is the one below
        elif kind == "subscribe":
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
            if data:  # '' is a finish waiter's poke (see the module doc)
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
        if queues is None:
            self._finished(None)  # a (re)subscription or loss: finishes may have been missed
            self._signalled("*")  # and so may signals
        self._bump(queues)
        with self._lock:
            for wanted, event in self._waiters.values():
                if queues is None or not wanted or wanted & queues:
                    event.set()


def _ids(data: Any) -> frozenset[int] | None:
    """The ids of a done message; None ("any") when it cannot be read."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    try:
        return frozenset(int(part) for part in str(data).split(",") if part)
    except ValueError:
        return None
