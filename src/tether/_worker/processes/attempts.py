"""Where each attempt of a process pool is, and how it leaves the pool.

Invariants (every change under the fleet's lock, ``Fleet.cond``, one lock for the children and
the attempts):

* An attempt is in exactly one place until it leaves: ``waiting`` (in the worker, for a child
  that may take it), held ahead by one child (``Child.ahead``, not started), or run by one
  child (``Child.entry``). ``sent`` maps every attempt a child holds or runs to that child.
* An attempt leaves the pool once, through :meth:`Attempts.finish`: its outcome is decided by
  whoever wins ``Registry.settle_once`` (the child's report, its timeout, a stop, a withdrawal,
  the child's end) and its slot is freed whatever happens.

The pool (``pool.py``) puts attempts in and takes them out of children; the messages children
send (``messages.py``) move them on; both end them here, so the path of a job reads in one
direction: pool, children and wire, the child process, pipes, messages, attempts.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from tether._errors import Interrupted
from tether._worker.processes.children import Child, State
from tether._worker.registry import Registry, Running
from tether.stores._contract import Outcome


def key_of(entry: Running) -> tuple[int, int]:
    """(job id, attempt): how the pipe protocol names an attempt."""
    return entry.ctx.id, entry.ctx.attempt


def stopped_outcome(entry: Running) -> Outcome | None:
    """What to write for an attempt the worker stopped or withdrew: ``cancelled``; nothing for
    a lost lease (the fence would reject it) or a timeout (already written); ``released`` on
    shutdown."""
    why = entry.ctx.stop_reason
    if why == "JobCancelled":
        return Outcome(entry.lease, "cancelled", error="cancelled on request")
    if why == "ShuttingDown":
        return Outcome(entry.lease, "released")
    return None


def stop_reason(entry: Running, why: type[Interrupted]) -> str:
    """Why the worker stops an attempt, for the log and the ``child_exited`` event."""
    first = entry.ctx.stop_reason or why.__name__
    if first == "JobCancelled":
        return "cancel requested"
    if first == "ShuttingDown":
        return "worker shutting down"
    return "timeout" if entry.extra.get("timed_out") else "lease lost"


class Attempts:
    def __init__(self, registry: Registry, settle: Callable[[Running, Outcome | None], None],
                 cond: threading.Condition) -> None:
        self.registry = registry
        self._settle = settle
        self.cond = cond  # the fleet's lock
        self.waiting: deque[Running] = deque()  # attempts waiting for a child
        self.sent: dict[Running, Child] = {}  # every attempt sent to a child, run or not

    def take_back(self, child: Child, entry: Running) -> None:
        """``entry`` is no longer held ahead by ``child`` (lock held)."""
        child.ahead.remove(entry)
        child.ahead_tasks[entry.ctx.task] -= 1
        if not child.ahead_tasks[entry.ctx.task]:
            del child.ahead_tasks[entry.ctx.task]
        child.ahead_bytes -= int(entry.extra.get("bytes", 0))  # type: ignore[call-overload]
        self.sent.pop(entry, None)
        if child.load == 0 and child.state is State.BUSY:
            child.state = State.IDLE

    def withdraw_all(self, child: Child) -> list[Running]:
        """Take back every job ``child`` holds unstarted, remembering each as withdrawn until
        the child acknowledges it (lock held)."""
        out = list(child.ahead)
        for entry in out:
            self.take_back(child, entry)
            child.withdrawn[key_of(entry)] = entry
        return out

    def finish(self, entry: Running, outcome: Outcome | None) -> None:
        """The attempt leaves the pool: settle it (if nobody has) and free its slot."""
        if self.registry.settle_once(entry):
            self._settle(entry, outcome)
        self.registry.mark(entry, returned=True)
