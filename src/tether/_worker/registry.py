"""In-flight attempts of one worker: the slots, and how long each lease is still trusted.

A lease is trusted locally until ``trusted_until`` on the worker's *monotonic* clock: the moment
the claim or the last successful renewal was *sent*, plus ``lease_ttl``. The store granted the
lease at its own now, which is never earlier than that send, so the store's expiry is never
earlier than ours: when the store cannot be reached, the worker gives the job up no later than
the reaper could take it.

A *slot* is taken while a handler runs (``-c N``: at most N run at once); it frees as the
handler returns (a handler thread's at its next take), so the next claim overlaps the write of
the previous outcomes (claim, run and finish are pipelined instead of serial). The *entry*
stays until its outcome is settled (written, rejected, or not to be written), so the
heartbeater keeps renewing the lease until the outcome has landed. Entries are capped at twice
the slots, so a slow store cannot pile up unwritten outcomes. Entries are keyed by themselves
(identity), so a self-zombie's old entry never collides with a new claim of the same job (and
no lease is hashed, a Python-level call, on the per-job path).

*Claimed ahead* (thread pool only): a job claimed before a slot is free for it waits in the
*backlog*, FIFO, holding its fenced lease and renewed by the heartbeat like any other entry.
A handler thread :meth:`take_batch` es the oldest when a slot frees, and, while handlers are
measured short, a few more into its :class:`Hand` (its batch): they hold no slot and start one
after another on the thread's one slot. The fetcher moves the not-started jobs of a hand back
to the head of the backlog once the thread's running handler has run ``LAG`` (:meth:`nudge`:
another thread takes them), and hands back (:meth:`unqueue`, hands first) what waited too
long, so a claimed-ahead job never waits behind a long-running handler while another worker
could run it. A not-started entry is in the backlog or in one hand, never both; whoever takes
it out (a handler starting it or a hand-back) is the only one that decides its outcome.

Each entry goes through two state machines, side by side and forward only:

* its handler's :class:`Stage`: WAITING (in the backlog or a hand, no slot) -> RUNNING (holds a
  slot) -> RETURNED (the slot is free again); a job handed back unstarted goes WAITING ->
  RETURNED. Within a batch the slot passes from one job to the next (RUNNING -> RETURNED and
  WAITING -> RUNNING with no lock: the slot count does not change); the last one's slot frees
  at the thread's next take;
* its outcome's :class:`Settlement`: OPEN -> SETTLING (someone won :meth:`Registry.settle_once`
  or :meth:`~Registry.settle_each`, the only ways out of OPEN: exactly one outcome per attempt)
  -> SETTLED (written, rejected as stale, or not to be written).

They are two machines, not one, because neither waits for the other: a timeout settles an
attempt whose handler still runs, and a handler returns before its outcome is written. An entry
leaves the registry once RETURNED and SETTLED. ``Running.lost`` is no stage: it is a fact about
the lease (the store or the trust window says it is gone), true from any stage on. Stages
are compared by identity against the module-level aliases (``_RETURNED``...): as cheap as the
booleans they replace, on the per-job path.
"""

from __future__ import annotations

import asyncio
import enum
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tether import _clock as clock
from tether._context import JobContext
from tether._errors import Interrupted
from tether._task import Task
from tether.stores._contract import Lease, Outcome

#: A queued job that waited this long for a handler thread, while a slot was free and every
#: awake handler thread was held that long by its handler, wakes another thread (seconds).
LAG = 0.005

_T = TypeVar("_T")


class Stage(enum.Enum):
    """Where an attempt's handler is (forward only)."""

    WAITING = "waiting"  # claimed ahead, in the backlog: it holds no slot yet
    RUNNING = "running"  # it holds a slot (a process pool's attempt from its claim on)
    RETURNED = "returned"  # the slot is free: the handler returned, or it never started


class Settlement(enum.Enum):
    """Where an attempt's outcome is (forward only; settle once)."""

    OPEN = "open"  # nobody has decided it yet
    SETTLING = "settling"  # someone won settle_once: the outcome is being decided or written
    SETTLED = "settled"  # written, rejected as stale, or not to be written


# Identity checks against module globals: an enum member looked up on its class costs as much
# as the whole check, on the per-job path.
_WAITING, _RUNNING, _RETURNED = Stage.WAITING, Stage.RUNNING, Stage.RETURNED
_OPEN, _SETTLING, _SETTLED = Settlement.OPEN, Settlement.SETTLING, Settlement.SETTLED


@dataclass(eq=False)
class Running:
    ctx: JobContext
    trusted_until: float
    stage: Stage = _WAITING
    settlement: Settlement = _OPEN
    lost: bool = False  # the store or the trust window says we no longer hold it
    async_task: asyncio.Task[object] | None = None
    loop: asyncio.AbstractEventLoop | None = None
    extra: dict[str, object] = field(default_factory=dict)
    # Called after every interrupt (any thread): how a process pool stops the child running it.
    on_interrupt: Callable[[Running, type[Interrupted]], None] | None = None
    task: Task[Any, Any] | None = None  # what runs it (set by the pool it is submitted to)
    queued_at: float = 0.0  # claimed ahead: when it entered the backlog (monotonic)
    started_at: float = 0.0  # when its handler was given a slot (monotonic)

    @property
    def lease(self) -> Lease:
        return self.ctx.lease

    def interrupt(self, why: type[Interrupted]) -> None:
        self.ctx.interrupt(why)
        task, loop = self.async_task, self.loop
        if task is not None and loop is not None:
            loop.call_soon_threadsafe(task.cancel)
        hook = self.on_interrupt
        if hook is not None:
            hook(self, why)


#: A decided outcome waiting to be settled (None: nothing to write, see Worker._settle).
Held = tuple[Running, Outcome | None]


def drain(items: deque[_T]) -> list[_T]:
    """Pop everything from ``items``, oldest first. A deque pop is atomic: what another
    thread pops at the same moment is its own, and each item leaves exactly once."""
    out = []
    while True:
        try:
            out.append(items.popleft())
        except IndexError:
            return out


def _queued_at(entry: Running) -> float:
    return entry.queued_at


def _head_queued_at(hand: Hand) -> float:
    """When the oldest entry in ``hand`` was queued (inf once the thread emptied it)."""
    try:
        return hand.rest[0].queued_at
    except IndexError:
        return float("inf")


class Hand:
    """One handler thread's batch: the entries it took in one :meth:`Registry.take_batch`
    beyond the one it starts at once, oldest first, WAITING and holding no slot.

    The thread starts them one after another on its one slot (the one that returned passes
    its slot to the next: RUNNING -> RETURNED and WAITING -> RUNNING with no lock, so no
    change in the slot count), popping each from the left. Under the registry lock, the
    fetcher takes back what a slow handler holds up (a nudge: the running one has run
    ``LAG``) or what waited too long (a hand-back), and the thread's next take returns what
    it did not start. A deque pop is atomic, so each entry leaves a hand exactly once, to
    whoever popped it: no entry starts twice, none is both started and handed back."""

    __slots__ = ("begun", "held", "rest", "started")

    def __init__(self) -> None:
        self.rest: deque[Running] = deque()
        #: Outcomes decided and not settled yet (settled together: see threads/pool.py).
        self.held: deque[Held] = deque()
        self.started = 0.0  # when the thread's running entry started (monotonic)
        self.begun = 0  # entries started from ``rest`` since the last take (see _taken)


class Registry:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: dict[Running, None] = {}  # by identity; a dict keeps claim order
        self._busy = 0  # handlers that have not returned yet
        self._full_lanes: set[str] = set()  # see watch_lanes
        #: Called (outside the lock) with the queues of a full lane whose handler returned.
        self.on_lane_free: Callable[[list[str]], None] | None = None
        lock = threading.RLock()
        #: Taken directly (``with self._lock``) where nobody waits or is woken: entering a
        #: Condition is a Python-level call on top of the lock's, on the per-job path.
        self._lock = lock
        self._cond = threading.Condition(lock)
        #: Handler threads wait here for a queued job and a free slot (same lock, so a
        #: hand-over never wakes the fetcher and the completer too).
        self._work = threading.Condition(lock)
        self._backlog: deque[Running] = deque()
        self._hands: list[Hand] = []  # one per handler thread (see Hand)
        #: Entries in hands, not started (an upper bound: a thread's own starts from its hand
        #: are counted off at its next take, so it may count a few started ones a moment longer).
        self._taken = 0
        self._idle = 0  # handler threads waiting in take()
        self._threads = 0  # handler threads taking jobs (set by each one's first take)
        self._closed = False
        self.ahead = 0  # how many jobs beyond the free slots the fetcher may hold (set by it)
        self.claim_at = 1  # free slots that wake the fetcher (see set_capacity)

    def __len__(self) -> int:
        return len(self._entries)

    # -- per-queue slots (``-q images=2``) -----------------------------------------------------
    def held_by_queue(self) -> dict[str, int]:
        """Attempts that hold or wait for a slot (not returned yet), by queue: what a
        queue's lane has in flight (claimed ahead counts, so a lane's cap bounds its running
        jobs whatever order the backlog is taken in)."""
        held: dict[str, int] = {}
        with self._lock:
            for entry in self._entries:
                if entry.stage is not _RETURNED:
                    queue = entry.ctx.job.queue
                    held[queue] = held.get(queue, 0) + 1
        return held

    def watch_lanes(self, queues: set[str]) -> None:
        """The queues whose lane was full at the last claim: the first handler of one of them
        to return calls :attr:`on_lane_free` (the fetcher may be waiting on the store, which
        no local slot would wake)."""
        with self._lock:
            self._full_lanes = queues

    def free(self) -> int:
        """How many jobs the fetcher may claim now: free slots not already spoken for by the
        backlog, plus the claim-ahead allowance; capped so that a slow store cannot pile up
        unwritten outcomes."""
        ahead = self.ahead
        queued = len(self._backlog) + self._taken
        slots = self.capacity - self._busy - queued
        room = 2 * self.capacity + ahead - len(self._entries)
        if queued and queued * 2 > ahead:
            return min(slots, room)  # refill only once the backlog is half used
        return min(slots + ahead, room)

    def set_capacity(self, capacity: int, claim_at: int = 1) -> None:
        """How many attempts the worker may hold from now on (a process pool claims ahead
        only for children that may queue jobs), and how many free slots wake the fetcher (a
        process pool whose children hold jobs ahead claims in batches, not a job at a time:
        they have work meanwhile); waiters wake when that many are free."""
        with self._lock:
            was_free, self.capacity = self.free(), capacity
            self.claim_at = max(1, claim_at)
            if was_free < self.claim_at <= self.free():
                self._cond.notify_all()

    def wait_free(self, timeout: float, stop: Callable[[], bool]) -> int:
        """Block until a slot is free (or stop() or timeout); returns how many to claim."""
        with self._lock:
            self._cond.wait_for(lambda: stop() or self.free() >= self.claim_at, timeout)
            return self.free()

    # -- the backlog of jobs claimed ahead ---------------------------------------------------
    def queue(self, entries: list[Running], wake: int) -> None:
        """Add entries that wait for a slot, and wake up to ``wake`` idle handler threads
        (each woken thread takes queued jobs until the backlog is empty; waking more threads
        than the handlers' run time needs only makes them fight for the GIL)."""
        now = clock.monotonic()
        with self._lock:
            for entry in entries:
                entry.queued_at = now
                self._entries[entry] = None
            self._backlog.extend(entries)
            awake = self._threads - self._idle  # each takes the next job when it is done
            self._work.notify(min(wake, self.capacity - self._busy) - awake)

    def nudge(self, waited: float) -> None:
        """Wake one more handler thread if the oldest queued job has waited ``waited``
        seconds or more while a slot is free and every awake handler thread is held by a
        handler that has run that long (a job waiting only because the process is short of
        CPU gains nothing from one more thread fighting for the GIL)."""
        now = clock.monotonic()
        with self._lock:
            self._steal(lambda hand: hand.started <= now - waited)
            if not (self._backlog and self._busy < self.capacity
                    and now - self._backlog[0].queued_at >= waited):
                return
            held = sum(1 for e in self._entries
                       if e.stage is _RUNNING and 0.0 < e.started_at <= now - waited)
            if held >= self._threads - self._idle:
                self._work.notify()

    def take(self, first: bool = False, done: Running | None = None) -> Running | None:
        """:meth:`take_batch` of one job, on a hand of its own (tests, and callers that run
        one job per take)."""
        return self.take_batch(Hand(), [] if done is None else [done], 1, first)

    def take_batch(self, hand: Hand, done: list[Running], most: int,
                   first: bool = False) -> Running | None:
        """The oldest queued entry, once a slot is free for it (blocks), with up to
        ``most - 1`` more queued entries put in ``hand`` (the caller's batch: they hold no
        slot; the caller starts each on the slot of the one before, see :class:`Hand`); None
        once closed. ``first``: the calling handler thread's first call. ``done``: the
        entries this thread ran since its last take (its slot is the last one's), marked
        returned under the same lock (one acquisition per batch). What is left in ``hand``
        (a batch cut short) goes back to the head of the backlog."""
        with self._lock:
            # One look at free() before and one after every change (marking ``done``,
            # taking the next): each only raises it, so any threshold crossed in between is
            # crossed from the first look to the last.
            was_free = self.free()
            self._taken -= hand.begun
            hand.begun = 0
            if hand.rest:
                self._restore(hand)
            for entry in done:
                if entry.stage is not _RETURNED:
                    entry.stage = _RETURNED
                    self._busy -= 1
                if entry.settlement is _SETTLED:
                    self._entries.pop(entry, None)
            if first:
                self._threads += 1
                self._hands.append(hand)
            while not self._closed and not (self._backlog and self._busy < self.capacity):
                if done:  # wake the waiters the return may concern first
                    self._woken(was_free)
                    was_free, done = self.free(), []
                self._idle += 1
                try:
                    self._work.wait()
                finally:
                    self._idle -= 1
            if self._closed:
                self._woken(was_free)
                return None
            backlog = self._backlog
            entry = backlog.popleft()
            self._busy += 1
            entry.stage = _RUNNING
            entry.started_at = hand.started = clock.monotonic()
            more = min(most - 1, len(backlog))
            if more > 0:
                rest = hand.rest
                for _ in range(more):
                    rest.append(backlog.popleft())
                self._taken += more
            self._woken(was_free)
            return entry

    def hands(self) -> Sequence[Hand]:
        """The handler threads' hands, one per thread since its first take (the thread pool
        reads their held outcomes: ``settle_held_up``). Read without the lock: the list only
        grows, and a hand's ``held`` is a deque each reader drains atomically."""
        return self._hands

    def _restore(self, hand: Hand) -> None:
        """Put what is left in ``hand`` back at the head of the backlog (the lock held)."""
        out = drain(hand.rest)
        self._taken -= len(out)
        self._backlog.extendleft(reversed(out))


    def _steal(self, which: Callable[[Hand], bool]) -> None:
        """Put the not-started entries of the hands ``which`` picks back at the head of the
        backlog, oldest first (the lock held): another thread, or a hand-back, takes them."""
        stolen: list[Running] = []
        for hand in self._hands:
            if hand.rest and which(hand):
                stolen += drain(hand.rest)
        if stolen:
            self._taken -= len(stolen)
            stolen.sort(key=_queued_at)
            self._backlog.extendleft(reversed(stolen))

    def _woken(self, was_free: int) -> None:
        """Wake the fetcher (and ``wait_empty``) if free() crossed its threshold since it was
        ``was_free``, or the registry emptied (the lock held)."""
        now_free = self.free()
        if (was_free < self.claim_at <= now_free or was_free <= 0 < now_free
                or not self._entries):
            self._cond.notify_all()

    def close(self) -> None:
        """Wake every handler thread waiting in :meth:`take` for good."""
        with self._lock:
            self._closed = True
            self._work.notify_all()

    def queued(self) -> int:
        """Entries claimed ahead that have not started (in the backlog or in a hand)."""
        with self._lock:
            return len(self._backlog) + sum(len(hand.rest) for hand in self._hands)

    def oldest_queued(self) -> float | None:
        """When the oldest entry not started yet was queued (monotonic), None if none is."""
        oldest = None
        for queue in (self._backlog, *(hand.rest for hand in self._hands)):
            try:
                at = queue[0].queued_at
            except IndexError:
                continue
            if oldest is None or at < oldest:
                oldest = at
        return oldest

    def unqueue(self, queued_before: float = float("inf")) -> list[Running]:
        """Take out of the backlog the entries queued before ``queued_before`` (all by
        default); the caller owns their outcome (they never started: no slot to free)."""
        out = []
        with self._lock:
            self._steal(lambda hand: _head_queued_at(hand) < queued_before)
            backlog = self._backlog
            while backlog and backlog[0].queued_at < queued_before:
                entry = backlog.popleft()
                entry.stage = _RETURNED
                if entry.settlement is _OPEN:
                    entry.settlement = _SETTLING
                    out.append(entry)
            if out:
                self._cond.notify_all()
        return out

    def stuck(self, started_before: float) -> int:
        """Busy slots whose handler started before ``started_before``: they are not going to
        free soon, so no job claimed ahead should count on them."""
        with self._lock:
            return sum(1 for e in self._entries
                       if e.stage is _RUNNING and 0.0 < e.started_at < started_before)

    def wait_empty(self, timeout: float | None) -> bool:
        with self._lock:
            return self._cond.wait_for(lambda: not self._entries, timeout)

    def add(self, entry: Running) -> None:
        """Add an entry whose handler starts now (it takes a slot at once)."""
        with self._lock:
            entry.stage = _RUNNING
            entry.started_at = clock.monotonic()
            self._entries[entry] = None
            self._busy += 1

    def entries(self) -> list[Running]:
        with self._lock:
            return list(self._entries)

    def to_renew(self) -> list[Running]:
        """Entries whose lease the heartbeater must still renew."""
        with self._lock:
            return [
                e for e in self._entries
                if not e.lost and e.settlement is not _SETTLED
                and not e.ctx.completed_in_transaction
            ]

    def mark(self, entry: Running, *, returned: bool = False, settled: bool = False) -> None:
        self.mark_many([entry], returned=returned, settled=settled)

    def mark_many(self, entries: list[Running], *, returned: bool = False,
                  settled: bool = False) -> None:
        """Record handlers returning and/or outcomes settling, under one lock acquisition.

        Waiters are woken only on a change they can act on (a slot freed while none was, or the
        registry emptied): a wake-up per job would make the fetcher fight every handler thread
        for the GIL.
        """
        with self._lock:
            self._mark(entries, returned, settled)
            freed: list[str] = []
            if returned and self._full_lanes:
                freed = [q for e in entries if (q := e.ctx.job.queue) in self._full_lanes]
                self._full_lanes = self._full_lanes.difference(freed)
        if freed and self.on_lane_free is not None:
            self.on_lane_free(freed)

    def _mark(self, entries: list[Running], returned: bool, settled: bool) -> None:
        """:meth:`mark_many`, the lock held."""
        was_free = self.free()
        async_slot = False
        for entry in entries:
            if returned and entry.stage is not _RETURNED:
                async_slot |= entry.loop is not None
                entry.stage = _RETURNED
                self._busy -= 1
            if settled:
                entry.settlement = _SETTLED
            if entry.stage is _RETURNED and entry.settlement is _SETTLED:
                self._entries.pop(entry, None)
        if (was_free < self.claim_at <= self.free()) or not self._entries:
            self._cond.notify_all()
        if async_slot and self._backlog:
            self._work.notify()  # an async handler's slot: no handler thread comes back

    def settle_each(self, items: list[Held]) -> list[Held]:
        """:meth:`settle_once` of each entry under one lock: the items whose entry this
        caller won."""
        won = []
        with self._lock:
            for item in items:
                entry = item[0]
                if entry.settlement is _OPEN:
                    entry.settlement = _SETTLING
                    won.append(item)
        return won

    def settle_once(self, entry: Running) -> bool:
        """Claim the right to decide this attempt's outcome; only the first caller wins."""
        with self._lock:
            if entry.settlement is not _OPEN:
                return False
            entry.settlement = _SETTLING
            return True
