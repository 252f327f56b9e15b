"""The thread pool: handlers run on threads of the worker process (``pool="thread"``).

Plain functions run on a pool of daemon threads (a handler that never returns cannot hold the
process open at exit); ``async def`` handlers run on one event loop thread. Both share the
worker's slots: a handler thread takes the oldest claimed job from the registry's backlog when
a slot is free (``Registry.take``), runs a sync handler itself and hands an async one to the
loop, so a job goes from the fetcher to the thread that runs it in one hand-off. The fetcher
claims ahead of the free slots (``claimahead.py``); what waits too long is handed back.

Invariants:

* Exactly one outcome is decided per attempt (``Registry.settle_once``): the handler's end,
  its timeout, or a forced shutdown, whichever comes first.
* A handler thread frees its slot whatever happens while settling (``_finish``): a thread
  that died there would leak a slot for good.
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
from tether._worker.registry import Registry, Running
from tether._worker.threads.claimahead import ClaimAhead
from tether.stores._contract import Outcome

log = logging.getLogger("tether.executor")
_LOOP_LOCK = threading.Lock()  # handler threads may start the async loop concurrently


class ThreadPool:
    """The :class:`~tether._worker.pool.Pool` whose handlers run on threads of the worker."""

    kind = "thread"

    def __init__(
        self,
        registry: Registry,
        concurrency: int,
        *,
        settle: Callable[[Running, Outcome | None], None],
        on_claimed: Callable[[Running], None],
        on_started: Callable[[Running, float], None],
        completer: Completer,
        notify: Callable[[], None],
        claim_ahead: int,
    ) -> None:
        """``claim_ahead``: most jobs claimed beyond the free slots (0: none)."""
        follow_logs()  # records the handlers log carry their job
        self.registry = registry
        self._settle = settle
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
        """Hand back what waited too long, and set how far ahead the next claim may reach."""
        ahead = self.ahead
        now = clock.monotonic()
        ahead.hand_back_stale(now)
        ahead.update(now)

    def hand_back_stale(self) -> None:
        """While draining (the fetcher has stopped), hand back what cannot start in time."""
        self.ahead.hand_back_stale(clock.monotonic())

    def wait_at_most(self, seconds: float) -> float:
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
        first = True
        done: Running | None = None  # marked returned by the next take, under its lock
        while True:
            entry = self.registry.take(first, done)
            first, done = False, None
            if entry is None:
                return
            task = entry.task
            assert task is not None
            self._on_claimed(entry)
            self._on_started(entry, 0.0)
            if task.is_async:
                loop = self._ensure_loop()
                entry.loop = loop
                asyncio.run_coroutine_threadsafe(self._run_async(entry, task), loop)
                continue
            token = bind(entry.ctx)
            try:
                entry.ctx.check_cancelled()  # interrupted while it waited for a slot
                args, kwargs = task.arguments(entry.ctx.job.payload, entry.ctx)
                result: Any = task.func(*args, **kwargs)
            except BaseException as exc:  # the handler's failure is data, not our crash
                self._finish(entry, task, None, exc, mark=False)
            else:
                self._finish(entry, task, result, None, mark=False)
            finally:
                unbind(token)
                done = entry

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
                exc: BaseException | None, *, mark: bool = True) -> None:
        """Settle the attempt; never raises, and frees the slot (a handler thread that died
        here would leak a slot for good): here, or (``mark=False``, a handler thread) in its
        next ``Registry.take``, which it reaches whatever happens here."""
        self.ahead.observe(clock.monotonic() - entry.started_at)
        try:
            try:
                outcome = decide(entry.ctx, task, result, exc)
            except Exception as err:  # e.g. Retry(delay="soon"): still one clear outcome
                outcome = Outcome(entry.lease, "error", error=describe(err), reason="error")
            if entry.ctx.completed_in_transaction:
                outcome = None
            if self.registry.settle_once(entry):
                self._settle(entry, outcome)
        except Exception:
            log.critical("could not settle job %s attempt %s", entry.ctx.id, entry.ctx.attempt,
                         exc_info=True)
        finally:
            if mark:
                self.registry.mark(entry, returned=True)

