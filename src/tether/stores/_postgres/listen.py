"""LISTEN/NOTIFY wake-ups for idle workers, kept alive by a background thread.

Enqueue, retry, reap and :meth:`PostgresStore.notify` send ``pg_notify('<schema>_jobs',
queue)`` in SQL (delivered at commit). One dedicated connection, outside the pool (a pooled
connection would be handed to other work and miss notifications), LISTENs for them; a thread
of the store reads it and files each notification under its queue, and waiters block on a
condition variable, so wake-up latency is the server's delivery time: milliseconds.

Invariants:

* :meth:`Listener.wait` never raises and never touches the network after the first call: an
  outage of any length is the thread's business, and a waiter only ever sees "woken" or
  "timed out". (It used to raise out of ``wait_for_jobs`` and stop an idle worker.)
* A lost connection is re-opened by the thread at once and then every 50 ms to 0.5 s, so the
  listener is back within about half a second of the server's return.
* Notifications sent while the connection was down are lost, so every re-connection is
  reported as a wake-up to every waiter: an idle worker claims within ~1 s of the server's
  return instead of at its next poll.

The same connection LISTENs on ``<schema>_done`` for ``wait_for_finish`` (issue #12): finish,
cancel and reap send the ids of the jobs they ended there (``'*'`` for "any"). Only while
someone waits (and for :data:`DONE_LINGER` seconds after): every finish of the fleet sends
one, and a worker that never waits for results must not receive and parse them all. A waiter
registers a :class:`FinishWaiter`, reads its jobs' status, and if the channel is not listened
to yet, pokes the thread (an empty notification on the jobs channel, so it need not wait for
its read timeout), waits for the LISTEN, and reads again: a finish committed before a read is
seen by it, one committed after the LISTEN is notified. Nothing is kept for ids nobody waits on.
While listening to it the connection also holds the shared advisory lock on the store's "done
key": ``finish`` skips its NOTIFY when it can take that key exclusively (nobody waits), and
holds it to its commit, so "ready" (channel and key held) means no finish can be missed.

The jobs channel is gated the same way (issue #10: NOTIFY costs a lone enqueue a fifth of its
time): while waiters wait here (and for :data:`JOBS_LINGER` seconds after) the connection holds
the shared lock on the "jobs key", and an enqueue skips its NOTIFY only when it can take that
key exclusively. A waiter claims before it waits, and a job enqueued between that claim and the
moment the key is (re)taken was not notified; so a wait returns True (claim again) as soon as it
sees the key taken anew since its thread's previous wait ended. While the key is not held the
thread reads in short ticks, so a worker that goes idle gets it within about 50 ms.

The same connection LISTENs on ``<schema>_signal`` for ``wait_for_signal`` (issue #22) once a
worker waits for signals: a cancel of a running job sends its holder's id there, a pause
``'*'``. A signal only brings the worker's heartbeat forward, so nothing gates it (cancels and
pauses are rare) and a lost one costs latency: an owner's first wait returns True once the
channel is listened to (its heartbeat then covers what came before), and so does every wait
after a re-connection.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Sequence

import psycopg
from psycopg import sql

from tether import _clock as clock
from tether._errors import StoreError
from tether.stores._postgres.connection import Conn, Connector
from tether.stores._postgres.driver_errors import one_line
from tether.stores._postgres.statements import TEMPLATES

log = logging.getLogger("tether.store.postgres")

#: How long one read of the connection blocks before the thread checks for close().
_TICK = 0.25
#: How soon the thread tries the done key again when a finish held it.
_LOCK_RETRY = 0.01
#: Seconds the done channel stays listened to after its last waiter left.
DONE_LINGER = 60.0
#: Seconds the jobs key stays held after the last wait for jobs ended (a worker that stays
#: idle waits again within a claim's time; one busy for longer lets enqueues skip NOTIFY).
JOBS_LINGER = 30.0
#: How long one read blocks while the jobs key is not held (the delay a new waiter may see).
_KEY_TICK = 0.05
#: Reconnection backoff while the server is unreachable: first retry, growth, ceiling.
_RETRY_FIRST, _RETRY_MAX = 0.05, 0.5
#: libpq's smallest useful connect_timeout: a black-holed server must not hold the thread
#: (and the server's return) for the pool's longer timeout.
_CONNECT_TIMEOUT = 2


class FinishWaiter:
    """One wait_for_finish call: its ids, whether a notification named one of them (or may
    have: ``'*'``, a re-connection, close), and an optional callback for an event loop."""

    __slots__ = ("callback", "hit", "ids")

    def __init__(self, ids: Collection[int], callback: Callable[[], None] | None) -> None:
        self.ids = frozenset(ids)
        self.hit = False
        self.callback = callback

    def wake(self) -> None:
        self.hit = True
        if self.callback is not None:
            self.callback()


class Listener:
    """Thread-safe: any number of waiters. Notifications for queues nobody waits on right
    now are kept for the next waiter instead of being dropped. Behind a transaction pooler
    its connection goes straight to the server (``direct=``, see :mod:`pooler`)."""

    #: While not :meth:`done_ready` (not listening to the done channel with the done key
    #: held), how often ``wait_for_finish`` reads its jobs' status instead of trusting
    #: notifications.
    poll_every = 1.0
    #: A waiter's poke on the jobs channel can make this listener ready sooner.
    listens = True

    def __init__(self, connector: Connector) -> None:
        self._connector = connector
        self._cond = threading.Condition()
        self._stash: set[str] = set()
        self._finish_waiters: set[FinishWaiter] = set()
        self._done_keep_until = 0.0  # monotonic: listen to the done channel until then
        self._done_ready = threading.Event()  # the done channel is listened to now
        self._jobs_waiting = 0  # threads inside wait() now
        self._jobs_used = False  # wait() was called: keep the key within reach (short ticks)
        self._jobs_keep_until = 0.0  # monotonic: hold the jobs key until then
        self._jobs_held = False  # the jobs key's shared lock is held (under _cond)
        self._jobs_epoch = 0  # bumped each time it is taken
        self._seen = threading.local()  # .epoch: the key's epoch when this thread last waited
        self._generation = 0  # bumped on every re-connection after a loss
        self._missed = False  # a re-connection no waiter has been told about yet
        self._signals: dict[str, bool] = {}  # owner -> signalled since its last wait
        self._signal_used = False  # wait_signal was called: LISTEN on the signal channel
        self._signal_ready = threading.Event()  # ... and it is listened to now
        self._closed = False
        self._thread: threading.Thread | None = None
        self._first_attempt = threading.Event()
        self._stop = threading.Event()

    def wait(self, queues: Sequence[str], timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a notification on ``queues`` (or a
        re-connection, which may have hidden one). The first call also waits for the
        listening connection's first attempt, so nothing sent after it returns is missed.
        A thread's first wait, and its first after the jobs key was taken anew, return True
        at once: jobs enqueued since its last claim may not have been notified."""
        wanted = set(queues)
        deadline = clock.monotonic() + max(0.0, timeout)
        self._jobs_used = True
        with self._cond:
            self._jobs_waiting += 1  # before the first attempt, which then takes the key too
        try:
            self._start()
            seen: int | None = getattr(self._seen, "epoch", None)
            with self._cond:
                generation = self._generation
                while not self._closed:
                    hit = self._stash & wanted
                    if hit:
                        self._stash -= hit
                        return True
                    if self._missed or self._generation != generation:
                        self._missed = False
                        return True
                    if self._jobs_held and self._jobs_epoch != seen:
                        return True  # taken since our claim: enqueues before it did not notify
                    remaining = deadline - clock.monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(remaining)
                return False
        finally:
            with self._cond:
                self._jobs_waiting -= 1
                self._jobs_keep_until = clock.monotonic() + JOBS_LINGER
                self._seen.epoch = self._jobs_epoch if self._jobs_held else None

    # -- signals (wait_for_signal) --------------------------------------------------------------
    def wait_signal(self, owner: str, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a signal to ``owner`` (or one to every worker,
        or a re-connection). An owner's first call returns True once the channel is listened
        to (False if it is not within ``timeout``)."""
        deadline = clock.monotonic() + max(0.0, timeout)
        self._signal_used = True
        self._start()
        with self._cond:
            first = owner not in self._signals
            if first:
                self._signals[owner] = False
        if first:
            if self._signal_ready.wait(max(0.0, deadline - clock.monotonic())):
                return True
            with self._cond:  # not listening yet: the next call is a first call again
                self._signals.pop(owner, None)
            return False
        with self._cond:
            while not self._closed:
                if self._signals.get(owner, False):
                    self._signals[owner] = False
                    return True
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return False

    def forget_signals(self, owner: str) -> None:
        """``owner`` waits no more (its worker unregistered)."""
        with self._cond:
            self._signals.pop(owner, None)

    def _signalled(self, payload: str) -> None:
        """File a notification of the signal channel (caller holds the lock)."""
        for owner in self._signals:
            if payload in ("*", owner):
                self._signals[owner] = True

    def _sync_signal(self, conn: Conn, signal_on: bool) -> bool:
        """LISTEN on the signal channel once someone waits for signals (never given up)."""
        if self._signal_used and not signal_on:
            channel = sql.Identifier(self._connector.signal_channel)
            conn.execute(sql.SQL("LISTEN {}").format(channel))
            self._signal_ready.set()
            return True
        return signal_on

    # -- finish waiters (wait_for_finish) --------------------------------------------------------
    def ready(self) -> bool:
        """True once the listening connection made its first attempt (start() won't block)."""
        return self._first_attempt.is_set()

    def start(self) -> None:
        """Start the thread and wait for its first attempt (blocks up to ~3 s)."""
        if not self._closed:
            self._start()

    def add_finish_waiter(
        self, ids: Collection[int], callback: Callable[[], None] | None = None
    ) -> FinishWaiter:
        """Register a waiter; call before reading the jobs' status. The callback runs on
        the listener's thread (an event loop's ``call_soon_threadsafe``)."""
        waiter = FinishWaiter(ids, callback)
        with self._cond:
            if self._closed:
                waiter.wake()
            self._finish_waiters.add(waiter)
        return waiter

    def remove_finish_waiter(self, waiter: FinishWaiter) -> None:
        with self._cond:
            self._finish_waiters.discard(waiter)
            self._done_keep_until = clock.monotonic() + DONE_LINGER

    def done_ready(self) -> bool:
        """The done channel is listened to: a finish committed from now on is notified."""
        return self._done_ready.is_set()

    def wait_done_ready(self, timeout: float) -> bool:
        return self._done_ready.wait(max(0.0, timeout))

    def _want_done(self) -> bool:
        with self._cond:
            return bool(self._finish_waiters) or clock.monotonic() < self._done_keep_until

    def wait_finish(self, waiter: FinishWaiter, timeout: float) -> bool:
        """Block until ``waiter`` is woken (True) or ``timeout`` passes (False)."""
        deadline = clock.monotonic() + max(0.0, timeout)
        with self._cond:
            while not waiter.hit:
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def _finished(self, payload: str) -> None:
        """File a notification of the done channel (caller holds the lock)."""
        if payload == "*":
            ended: frozenset[int] | None = None
        else:
            try:
                ended = frozenset(int(part) for part in payload.split(",") if part)
            except ValueError:
                ended = None  # not ours to parse: wake everyone, they re-read
        for waiter in self._finish_waiters:
            if ended is None or waiter.ids & ended:
                waiter.wake()

    def _wake_all_finish_waiters(self) -> None:
        for waiter in self._finish_waiters:
            waiter.wake()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._wake_all_finish_waiters()
            self._cond.notify_all()
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(_TICK * 4)

    # -- the thread ----------------------------------------------------------------------------
    def _start(self) -> None:
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name=f"tether-listen-{self._connector.channel}",
                    daemon=True)
                self._thread.start()
        self._first_attempt.wait(_CONNECT_TIMEOUT + 1.0)

    def _run(self) -> None:
        conn: Conn | None = None
        delay = _RETRY_FIRST
        lost = False
        done_on = False  # this connection LISTENs on the done channel
        locked = False  # ... and holds the done key's shared advisory lock (queries.sql)
        signal_on = False  # this connection LISTENs on the signal channel
        try:
            while not self._stop.is_set():
                if conn is None:
                    conn = self._open()
                    if conn is None:
                        self._first_attempt.set()
                        lost = True
                        self._stop.wait(delay)
                        delay = min(delay * 2, _RETRY_MAX)
                        continue
                    delay = _RETRY_FIRST
                    if lost:
                        lost = False
                        log.info("listening connection re-established")
                        with self._cond:
                            self._generation += 1
                            self._missed = True
                            self._wake_all_finish_waiters()  # finishes may have been missed
                            self._signalled("*")  # and so may signals
                            self._cond.notify_all()
                try:
                    done_on, locked = self._sync_done(conn, done_on, locked)
                    self._sync_jobs(conn)
                    signal_on = self._sync_signal(conn, signal_on)
                    self._first_attempt.set()  # LISTENing, and the key tried if a waiter came
                    # Each notification is filed the moment it arrives (the generator yields as
                    # they come); the timeout only bounds how long close() waits for us (and,
                    # while a key is not ours yet, when we try it again).
                    tick = _TICK if locked or not done_on else _LOCK_RETRY
                    if self._jobs_used and not self._jobs_held:
                        tick = min(tick, _LOCK_RETRY if self._want_jobs() else _KEY_TICK)
                    for note in conn.notifies(timeout=tick):
                        with self._cond:
                            if note.channel == self._connector.done_channel:
                                self._finished(note.payload)
                            elif note.channel == self._connector.signal_channel:
                                self._signalled(note.payload)
                            elif note.payload:  # '' is a waiter's poke (see module doc)
                                self._stash.add(note.payload)
                            self._cond.notify_all()
                        if (self._want_done() != done_on or self._want_jobs() != self._jobs_held
                                or self._signal_used != signal_on):
                            break
                except psycopg.Error as exc:
                    if not self._stop.is_set():
                        log.warning("listening connection lost (%s); reconnecting", one_line(exc))
                    _close(conn)
                    conn = None
                    lost = True
                    done_on = locked = signal_on = False
                    self._done_ready.clear()
                    self._signal_ready.clear()
                    with self._cond:
                        self._jobs_held = False  # a session lock dies with its connection
        finally:
            self._first_attempt.set()
            if conn is not None:
                _close(conn)

    def _want_jobs(self) -> bool:
        with self._cond:
            return self._jobs_waiting > 0 or clock.monotonic() < self._jobs_keep_until

    def _sync_jobs(self, conn: Conn) -> None:
        """Hold the jobs key's shared lock while waiters want it (tried, never waited for: an
        enqueue holds it exclusively to its commit), give it up after the linger."""
        want, key = self._want_jobs(), self._connector.jobs_key
        if want and not self._jobs_held:
            row = conn.execute(TEMPLATES["key_share"], {"key": key}).fetchone()
            if row and row[0]:
                with self._cond:
                    self._jobs_held = True
                    self._jobs_epoch += 1
                    self._cond.notify_all()
        elif not want and self._jobs_held:
            with self._cond:
                self._jobs_held = False
            conn.execute(TEMPLATES["key_unshare"], {"key": key})

    def _sync_done(self, conn: Conn, done_on: bool, locked: bool) -> tuple[bool, bool]:
        """LISTEN on the done channel and hold the done key's shared lock while finish waiters
        want it; give both up after. Ready (waiters may trust the channel) once both are held.
        The lock is only tried (a finish holds the key exclusively for milliseconds): this
        thread never blocks on it, so queue wake-ups keep flowing."""
        want = self._want_done()
        channel = sql.Identifier(self._connector.done_channel)
        key = self._connector.done_key
        if want and not done_on:
            conn.execute(sql.SQL("LISTEN {}").format(channel))
            done_on = True
        if want and not locked:
            row = conn.execute(TEMPLATES["key_share"], {"key": key}).fetchone()
            locked = bool(row and row[0])
            if locked:
                self._done_ready.set()
        if not want and done_on:
            self._done_ready.clear()
            if locked:
                conn.execute(TEMPLATES["key_unshare"], {"key": key})
            conn.execute(sql.SQL("UNLISTEN {}").format(channel))
            done_on = locked = False
        return done_on, locked

    def _open(self) -> Conn | None:
        """A new listening connection, or None while the server cannot be reached."""
        try:
            conn = self._connector.connect(listener=True, connect_timeout=_CONNECT_TIMEOUT)
        except StoreError as exc:  # StoreUnavailable, or ConfigError-like trouble: retry
            log.debug("listening connection: %s", exc)
            return None
        except Exception as exc:  # e.g. a ConfigError after a password change: keep trying
            log.warning("listening connection: %s", exc)
            return None
        try:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._connector.channel)))
        except psycopg.Error as exc:
            log.warning("cannot LISTEN: %s", one_line(exc))
            _close(conn)
            return None
        return conn


def _close(conn: Conn) -> None:
    try:
        conn.close()
    except psycopg.Error:
        pass


__all__ = ["Listener"]
