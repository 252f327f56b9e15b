"""How claimed jobs reach the handlers: the pool a worker runs them in, behind one interface.

Two pools implement :class:`Pool`: ``threads/`` (handlers on threads of the worker process; the
fetcher claims ahead of the free slots into a backlog) and ``processes/`` (handlers in child
processes; jobs are sent ahead to the children). The worker and its fetcher see only this
interface, so claiming, the batched heartbeat, deadlines, completion and shutdown are the same
code for both; :func:`make_pool` is the one place that chooses.

Invariants every pool keeps:

* A job held ahead (in the backlog, or sent to a child) is a registry entry from its claim on,
  so it holds a fenced lease renewed by the batched heartbeat and counted by the recovery
  bound exactly like a running job.
* Exactly one outcome per attempt (``Registry.settle_once``); the pool hands it to ``settle``
  and frees the attempt's slot (``Registry.mark``) whatever happens.
* ``Running.interrupt`` (lease lost, cancel requested, timeout, forced shutdown) reaches the
  handler whichever pool runs it: a thread pool tells the handler (and cancels an async one);
  a process pool kills the child running it, or withdraws it from the child holding it.
* The pool tells its worker two moments of an attempt: ``on_claimed`` (it holds a slot: the
  ``claimed`` event) and ``on_started`` (its handler started ``late`` seconds ago: its timeout
  counts from then, never from the claim or from waiting in a queue).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from tether._events import Events
from tether._task import Task
from tether._worker.completer import Completer
from tether._worker.poolconfig import PoolConfig
from tether._worker.processes.pool import ProcessPool
from tether._worker.registry import Held, Registry, Running
from tether._worker.threads.pool import ThreadPool
from tether.stores._contract import Outcome, Store


class Pool(Protocol):
    """Where a worker's handlers run. Methods marked *fetcher* are called by the fetcher thread
    only (one claim at a time); the others by the worker's main thread."""

    kind: str  # "thread" or "process"

    @property
    def claims_ahead(self) -> bool:
        """The fetcher may claim more jobs than there are free slots."""

    def start(self) -> None:
        """Be ready to run a job before the worker registers (a process pool's children have
        imported the app); ConfigError if it cannot."""

    def stop(self) -> None:
        """Stop for good: no handler starts after this (those running are not waited for)."""

    def before_claim(self) -> None:
        """*fetcher*: before each claim: hand back what waited too long, size the next claim."""

    def wait_at_most(self, seconds: float) -> float:
        """*fetcher*: ``seconds``, shortened so the fetcher wakes when the pool needs it to."""

    def submit(self, entry: Running, task: Task[Any, Any]) -> None:
        """*fetcher*: a claimed job whose task is known (one call per job, in claim order)."""

    def dispatch(self) -> None:
        """*fetcher*: after each claim (also an empty one): start or send what was submitted,
        in one hand-off."""

    def hand_back_stale(self) -> None:
        """While draining, the fetcher stopped: hand back what cannot start in time."""


def make_pool(
    config: PoolConfig,
    registry: Registry,
    *,
    concurrency: int,
    settle: Callable[[Running, Outcome | None], None],
    on_claimed: Callable[[Running], None],
    on_started: Callable[[Running, float], None],
    on_fatal: Callable[[BaseException], None],
    settle_many: Callable[[list[Held]], None],
    store: Store,
    events: Events,
    completer: Completer,
    notify: Callable[[], None],
    owner: str,
    claim_ahead: int,
) -> Pool:
    """The pool ``config`` names. ``claim_ahead``: most jobs a thread pool claims beyond its
    free slots (0: none)."""
    if config.kind == "process":
        return ProcessPool(registry, concurrency, settle=settle, on_claimed=on_claimed,
                           on_started=on_started, store=store, events=events, config=config,
                           owner=owner, on_fatal=on_fatal)
    return ThreadPool(registry, concurrency, settle=settle, settle_many=settle_many,
                      on_claimed=on_claimed,
                      on_started=on_started, completer=completer, notify=notify,
                      claim_ahead=claim_ahead)
