"""The thread pool: handlers run on threads of the worker process (``pool="thread"``).

Plain functions run on a pool of daemon threads (a handler that never returns cannot hold the
process open at exit); ``async def`` handlers run on one event loop thread. Both share the
worker's slots: a handler thread takes the oldest claimed job from the registry's backlog when
a slot is free (``Registry.take_batch``), runs a sync handler itself and hands an async one to
the loop, so a job goes from the fetcher to the thread that runs it in one hand-off. The fetcher
claims ahead of the free slots (``claimahead.py``); what waits too long is handed back.

Batches: while handlers are measured short (``ClaimAhead.batch``), a thread takes several
queued jobs in one take and runs them one after another on its one slot (the per-job lock,
wake-up and bookkeeping are per batch instead: one take, one settle pass, one hand-off to the
completer). Each job still starts on its own (its claimed event, its timeout armed at its
start, its context bound for ``current_job()`` and interrupts).

Invariants:

* Exactly one outcome is decided per attempt (``Registry.settle_once`` / ``settle_each``):
  the handler's end, its timeout, or a forced shutdown, whichever comes first.
* A handler thread frees its slot whatever happens while settling (``_settle_held`` and
  ``_finish`` never raise): a thread that died there would leak a slot for good.
* A job is never held up behind a slow handler of its batch: the fetcher takes back the
  jobs not started yet once the running one has run ``LAG`` (``Registry.nudge``), and
  settles the outcomes the thread holds (``settle_held_up``); a job with a timeout has its
  outcome settled as soon as it returns, before its timer could fire.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from tether import _clock as clock
from tether._context import bind, follow_logs, unbind
from tether._task import Task
from tether._worker.completer import Completer
from tether._worker.outcome import decide, describe
from tether._worker.registry import LAG, Hand, Held, Registry, Running, Stage, drain
from tether._worker.threads.claimahead import ClaimAhead
from tether.stores._contract import Outcome

log = logging.getLogger("tether.executor")
_LOOP_LOCK = threading.Lock()  # handler threads may start the async loop concurrently
#: A handler thread settles the outcomes it holds before starting its next job once the oldest
#: has been held this long (seconds); the fetcher settles them once its handler has run LAG.
HOLD_AT_MOST = LAG / 10


class ThreadPool:
    """The :class:`~tether._worker.pool.Pool` whose handlers run on threads of the worker."""

    kind = "thread"

    def __init__(
        self,
        registry: Registry,
        concurrency: int,
        *,
        settle: Callable[[Running, Outcome | None], None],
        settle_many: Callable[[list[Held]], None],
        on_claimed: Callable[[Running], None],
        on_started: Callable[[Running, float], None],
        completer: Completer,
        notify: Callable[[], None],
        claim_ahead: int,
    ) -> None:
        """``settle``: one attempt's outcome (an async handler's); ``settle_many``: the
        outcomes a batch settled at once, in one hand-off to the completer. ``claim_ahead``:
        most jobs claimed beyond the free slots (0: none)."""
        follow_logs()  # records the handlers log carry their job
        self.registry = registry
        self._settle = settle
        self._settle_many = settle_many
        self._on_claimed = on_claimed
        self._on_started = on_started
        self.ahead = ClaimAhead(registry, claim_ahead, completer, notify)
        self._claimed: list[Running] = []  # submitted since the last dispatch (the fetcher's)
        self._threads = [
            threading.Thread(target=self._thread_main, name=f"tether-handler-{i}", daemon=True)
            for i in range(concurrency)
        ]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self.registry.close()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)

    @property
    def claims_ahead(self) -> bool:
        return self.ahead.limit > 0

    # -- the fetcher's side --------------------------------------------------------------
    def before_claim(self) -> None:
        """Hand back what waited too long, settle what a slow handler holds up, and set how
        far ahead the next claim may reach."""
        ahead = self.ahead
        now = clock.monotonic()
        ahead.hand_back_stale(now)
        self.settle_held_up(now)
        ahead.update(now)

    def hand_back_stale(self) -> None:
        """While draining (the fetcher has stopped), hand back what cannot start in time."""
        now = clock.monotonic()
        self.ahead.hand_back_stale(now)
        self.settle_held_up(now)

    def wait_at_most(self, seconds: float) -> float:
        """``seconds``, shortened so that the fetcher looks at the backlog, and at outcomes
        held by a handler thread, on time."""
        if any(hand.held for hand in self.registry.hands()):
            seconds = min(seconds, LAG)
        return self.ahead.wait_at_most(seconds)

    def submit(self, entry: Running, task: Task[Any, Any]) -> None:
        """A claimed job; it goes to the backlog with the rest of its claim (``dispatch``)."""
        entry.task = task
        self._claimed.append(entry)

    def dispatch(self) -> None:
        """Queue the claim in the backlog in one hand-off, waking as many handler threads as
        it needs (``ClaimAhead.wake``); a handler thread starts each when a slot is free."""
        if self._claimed:
            claimed, self._claimed = self._claimed, []
            self.registry.queue(claimed, self.ahead.wake(len(claimed)))

    # -- sync ------------------------------------------------------------------------------
    def _thread_main(self) -> None:
        registry, ahead = self.registry, self.ahead
        hand = Hand()  # the registry keeps it from the first take (Registry.hands)
        first = True
        done: list[Running] = []  # marked returned by the next take, under its lock
        while True:
            entry = registry.take_batch(hand, done, ahead.batch(), first)
            first, done = False, []
            if entry is None:
                return
            self._run_batch(entry, hand, done)

    def _run_batch(self, entry: Running, hand: Hand, done: list[Running]) -> None:
        """Run ``entry``, then each job left in ``hand``, one after another on this thread's
        one slot; hold their outcomes in ``hand`` and settle them together (``_settle_held``)
        at the end, once they have been held :data:`HOLD_AT_MOST`, and at once for a job
        with a timeout armed (its timer must not outlive its handler)."""
        rest, held = hand.rest, hand.held
        observe = self.ahead.observe
        since = 0.0  # when the oldest held outcome was decided
        while True:
            task = entry.task
            assert task is not None
            self._on_claimed(entry)
            self._on_started(entry, 0.0)
            if task.is_async:  # its slot goes with it: its _finish marks it returned
                loop = self._ensure_loop()
                entry.loop = loop
                asyncio.run_coroutine_threadsafe(self._run_async(entry, task), loop)
                break
            ctx = entry.ctx
            token = bind(ctx)
            exc: BaseException | None = None
            result: Any = None
            try:
                ctx.check_cancelled()  # interrupted while it waited for a slot
                args, kwargs = task.arguments(ctx.job.payload, ctx)
                result = task.func(*args, **kwargs)
            except BaseException as err:  # the handler's failure is data, not our crash
                exc = err
            finally:
                unbind(token)
            now = clock.monotonic()
            done.append(entry)
            observe(now - entry.started_at)
            if not held:
                since = now
            held.append((entry, self._decide(entry, task, result, exc)))
            if entry.extra or now - since >= HOLD_AT_MOST:
                self._settle_held(hand)
            try:
                following = rest.popleft()
            except IndexError:
                break
            if held and following.task is not task:  # a job of another task: no telling
                self._settle_held(hand)  # how long it runs, so nothing waits on it
            # The slot passes from the one that returned to the next (no lock: see Hand).
            hand.begun += 1
            entry.stage = Stage.RETURNED
            following.stage = Stage.RUNNING
            following.started_at = hand.started = now
            entry = following
        if held:
            self._settle_held(hand)

    def _settle_held(self, hand: Hand) -> None:
        """Settle the outcomes held in ``hand``: one settle-once pass under one lock, one
        hand-off to the completer. Never raises (the thread must reach its next take, which
        frees its slot). Called by the handler thread, or by the fetcher for a thread whose
        handler holds them up (``settle_held_up``); each outcome goes to one of them."""
        items = drain(hand.held)
        if not items:
            return
        try:
            won = self.registry.settle_each(items)
            if won:
                self._settle_many(won)
        except Exception:
            log.critical("could not settle %d job outcome(s)", len(items), exc_info=True)

    def settle_held_up(self, now: float) -> None:
        """*fetcher*: settle the outcomes a handler thread holds while its current handler has
        run :data:`~tether._worker.registry.LAG` or more (a slow job after short ones in
        one batch): they are not held up longer than that plus the fetcher's wake-up."""
        for hand in self.registry.hands():
            if hand.held and hand.started <= now - LAG:
                self._settle_held(hand)

    def _decide(self, entry: Running, task: Task[Any, Any], result: Any,
                exc: BaseException | None) -> Outcome | None:
        """The attempt's outcome (None: nothing to write); never raises."""
        try:
            outcome = decide(entry.ctx, task, result, exc)
        except Exception as err:  # e.g. Retry(delay="soon"): still one clear outcome
            outcome = Outcome(entry.lease, "error", error=describe(err), reason="error")
        if entry.ctx.completed_in_transaction:
            return None
        return outcome

    # -- async -----------------------------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with _LOOP_LOCK:
            return self._make_loop()

    def _make_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(
                target=loop.run_forever, name="tether-asyncio", daemon=True
            )
            self._loop = loop
            self._loop_thread.start()
        return self._loop

    async def _run_async(self, entry: Running, task: Task[Any, Any]) -> None:
        entry.async_task = asyncio.current_task()
        token = bind(entry.ctx)
        try:
            if entry.ctx.cancelled:  # interrupted before it could start
                raise asyncio.CancelledError
            args, kwargs = task.arguments(entry.ctx.job.payload, entry.ctx)
            result = await task.func(*args, **kwargs)
        except asyncio.CancelledError as exc:
            self._finish(entry, task, None, exc)
        except BaseException as exc:
            self._finish(entry, task, None, exc)
        else:
            self._finish(entry, task, result, None)
        finally:
            unbind(token)

    # -- outcome ---------------------------------------------------------------------------
    def _finish(self, entry: Running, task: Task[Any, Any], result: Any,
                exc: BaseException | None) -> None:
        """Settle an async handler's attempt and free its slot; never raises."""
        self.ahead.observe(clock.monotonic() - entry.started_at)
        try:
            outcome = self._decide(entry, task, result, exc)
            if self.registry.settle_once(entry):
                self._settle(entry, outcome)
        except Exception:
            log.critical("could not settle job %s attempt %s", entry.ctx.id, entry.ctx.attempt,
                         exc_info=True)
        finally:
            self.registry.mark(entry, returned=True)
