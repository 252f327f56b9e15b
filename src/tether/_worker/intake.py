"""How claimed jobs reach the handlers: the executor a worker runs, and what it holds ahead.

The thread pool claims ahead of its free slots (``ahead.py``): a claimed batch goes into the
registry's backlog in one hand-off and the handler threads take it from there; what waits too
long is handed back. The process pool sends ahead instead (``sendahead.py``): the whole claim
goes out to the children in one write per child. The fetcher sees only :class:`Intake`, so
its loop is the same for both.

Invariant: a job held ahead (in the backlog, or sent to a child) is a registry entry from its
claim on, so it holds a fenced lease renewed by the batched heartbeat and counted by the
recovery bound exactly like a running job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tether import _clock as clock
from tether._events import Events
from tether._task import Task
from tether._worker.completer import Completer
from tether._worker.poolconfig import PoolConfig
from tether._worker.processes.pool import ProcessPool
from tether._worker.registry import Registry, Running
from tether._worker.threads.claimahead import ClaimAhead
from tether._worker.threads.pool import Executor
from tether.stores._contract import Outcome, Store


class Intake:
    def __init__(
        self,
        registry: Registry,
        pool: PoolConfig,
        settle: Callable[[Running, Outcome | None], None],
        store: Store,
        events: Events,
        completer: Completer,
        *,
        concurrency: int,
        owner: str,
        claim_batch: int,
        claim_ahead: bool,
        notify: Callable[[], None],
        on_fatal: Callable[[BaseException], None],
        on_start: Callable[[Running, Task[Any, Any]], None],
        on_child_start: Callable[[Running, float], None],
    ) -> None:
        self.registry = registry
        self.executor: Executor | ProcessPool
        self.ahead: ClaimAhead | None = None
        if pool.kind == "process":
            self.executor = ProcessPool(registry, settle, store, events, pool,
                                        concurrency=concurrency, owner=owner,
                                        on_fatal=on_fatal, on_started=on_child_start)
        else:
            self.ahead = ClaimAhead(registry, claim_batch if claim_ahead else 0, completer,
                                    notify)
            self.executor = Executor(registry, settle, concurrency, on_start=on_start,
                                     on_return=self.ahead.observe)

    def before_claim(self) -> None:
        """Hand back what waited too long, and set how far ahead the next claim may reach."""
        ahead = self.ahead
        if ahead is not None:
            now = clock.monotonic()
            ahead.hand_back_stale(now)
            ahead.update(now)

    def hand_back_stale(self) -> None:
        """While draining (the fetcher has stopped), hand back what cannot start in time."""
        if self.ahead is not None:
            self.ahead.hand_back_stale(clock.monotonic())

    def wait_at_most(self, seconds: float) -> float:
        """``seconds``, shortened so that the fetcher looks at the backlog on time."""
        return seconds if self.ahead is None else self.ahead.wait_at_most(seconds)

    def hand_over(self, queued: list[Running]) -> None:
        """After a claim: the thread pool's backlog, or one write per child."""
        ahead = self.ahead
        if queued and ahead is not None:
            self.registry.queue(queued, ahead.wake(len(queued)))
        executor = self.executor
        if isinstance(executor, ProcessPool):
            executor.dispatch()
