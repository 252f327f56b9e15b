"""Which child of a process pool gets the next job, and when a job sent ahead must go back.

A child holds the job it runs and up to ``depth()`` more, sent ahead so it never waits for its
worker between two short jobs (each wait is two process wake-ups, which on a busy machine cost
more than a no-op job), and so that the worker claims, sends and reads in batches. Sending
ahead must never make a job wait long:

* a child holds no more than it should start within ``WITHIN`` (the moving average of handler
  time across the pool, so at most ``AHEAD`` no-op jobs, one or two 20 ms ones);
* a job goes ahead only behind jobs of tasks known to be quick: whose handlers have run
  (a task with no duration yet is not known to be quick), quickly (``AHEAD_FOR``, a moving
  average per task), and have not crashed their child within ``CRASH_MEMORY`` (a crash ends
  every job queued behind it: a crash-looping task used to hand back the same dozen jobs at
  each crash). It goes ahead only while the running one has run less than ``PATIENCE``; an
  idle child is always preferred, then the least loaded;
* a job still queued behind a handler that has run ``PATIENCE`` goes back to the store
  (released: it never ran), where an idle worker, or this one, takes it at once; so does a job
  waiting in the worker while no child can take it and every child's handler has run
  ``PATIENCE`` (a child starting, idle, or just started on a job will take it soon: handing
  it back then would only churn it through the store);
* the worker claims ahead only for children that may hold jobs ahead (``capacity``), so it does
  not claim jobs only to hand them back;
* what is queued in one child's pipe stays under ``AHEAD_BYTES``, below the pipe's buffer, so a
  send to a busy child never blocks the sender.
"""

from __future__ import annotations

import heapq

from tether._worker.processes.children import Child, State
from tether._worker.processes.fleet import Fleet

#: Most jobs a child may hold besides the one it runs.
AHEAD = 40
#: A child holds no more jobs ahead than its handlers should start within this (seconds).
WITHIN = 0.050
#: Most bytes of run messages queued in one child's pipe (the Linux pipe buffer is 64 KiB); a
#: bigger job waits in the worker for an idle child.
#: Counted with ``wire.run_size``, an upper bound (5-10x a small job's real size), so the
#: real bytes stay well under it.
AHEAD_BYTES = 48 * 1024
#: Jobs go ahead only behind a task whose handler took less than this (moving average).
AHEAD_FOR = 0.05
#: Jobs queued behind a handler running longer than this go back to the store.
PATIENCE = 0.5
#: Seconds a task whose attempt crashed its child is not queued behind.
CRASH_MEMORY = 60.0
_WEIGHT = 0.2  # of the newest duration in the moving average


class Ahead:
    """The policy above, over the fleet's children (every method: the fleet's lock held)."""

    def __init__(self, fleet: Fleet, max_tasks: int | None) -> None:
        self.fleet = fleet
        self.max_tasks = max_tasks
        self.took: dict[str, float] = {}  # task name -> moving average of handler seconds
        self.crashed: dict[str, float] = {}  # task name -> monotonic time of its last crash
        self.mean = 0.0  # moving average of handler seconds, every task

    def learn(self, task: str, seconds: float) -> None:
        old = self.took.get(task)
        self.took[task] = seconds if old is None else (1 - _WEIGHT) * old + _WEIGHT * seconds
        self.mean = (1 - _WEIGHT) * self.mean + _WEIGHT * seconds

    def crash(self, task: str, now: float) -> None:
        """An attempt of ``task`` ended with its child's death: nothing goes ahead behind that
        task for ``CRASH_MEMORY`` (it reported no duration, and would still look quick)."""
        self.crashed[task] = now

    def quick(self, task: str, now: float) -> bool:
        """Whether a job may wait behind one of ``task``: its handlers have been quick and
        have not crashed their child lately."""
        took = self.took.get(task)
        if took is None or took >= AHEAD_FOR:
            return False
        crashed = self.crashed.get(task)
        return crashed is None or now - crashed >= CRASH_MEMORY

    def depth(self) -> int:
        """Jobs a child may hold ahead now."""
        return max(1, min(AHEAD, int(WITHIN / max(self.mean, WITHIN / AHEAD))))

    def may_queue_behind(self, child: Child, now: float) -> bool:
        """Whether a job sent to ``child`` now would start soon: every job it holds is of a
        quick task, and the running one has not run ``PATIENCE``."""
        entry = child.entry
        if entry is not None and (now - child.started_at >= PATIENCE
                                  or not self.quick(entry.ctx.task, now)):
            return False
        return all(self.quick(task, now) for task in child.ahead_tasks)

    def soon_free(self, now: float) -> bool:
        """Whether some child will take a job soon: it is starting, idle, holds only jobs not
        started yet, or runs a handler that has not run ``PATIENCE``."""
        for child in self.fleet.children:
            if child.stop_why is not None or child.state is State.RETIRING:
                continue
            if child.state in (State.STARTING, State.IDLE) or child.entry is None:
                return True
            if now - child.started_at < PATIENCE:
                return True
        return False

    def stuck(self, child: Child, now: float) -> bool:
        """Jobs wait in ``child`` behind a handler that has run PATIENCE."""
        return bool(child.ahead) and child.entry is not None and (
            now - child.started_at >= PATIENCE)

    @staticmethod
    def serving(child: Child) -> bool:
        return child.state in (State.IDLE, State.BUSY) and child.stop_why is None

    def pick(self, now: float, size: int) -> Child | None:
        """The child to send a run message of ``size`` bytes to: an idle one, else the least
        loaded that may hold it ahead; None when none may."""
        best: Child | None = None
        depth = self.depth()
        for child in self.fleet.children:
            if not self.serving(child):
                continue
            if self.max_tasks is not None and child.assigned >= self.max_tasks:
                continue
            load = child.load
            if load == 0:
                return child
            if load > depth or child.ahead_bytes + size > AHEAD_BYTES:
                continue
            if (best is None or load < best.load) and self.may_queue_behind(child, now):
                best = child
        return best

    def chooser(self, now: float) -> Chooser:
        return Chooser(self, now)

    def capacity(self, now: float, concurrency: int) -> int:
        """Attempts the worker may hold now: one per child, plus ``depth()`` per child that may
        hold jobs ahead."""
        depth = self.depth()
        held = sum(1 + (depth if self.may_queue_behind(c, now) else 0)
                   for c in self.fleet.children if self.serving(c))
        return max(held, concurrency)


class Chooser:
    """:meth:`Ahead.pick` for a whole dispatch, the same choices: each child's standing is
    computed once, not once per job (at -c 10 that loop was the fetcher's hottest spot).
    The fleet's lock is held from creation to the last pick."""

    def __init__(self, ahead: Ahead, now: float) -> None:
        self.depth = ahead.depth()
        self.max_tasks = ahead.max_tasks
        self._ahead = ahead
        self._now = now
        self._index: dict[Child, int] = {}
        self._heap: list[tuple[int, int, Child]] = []  # (load, position in the fleet, child)
        self._quick: dict[str, bool] = {}  # Ahead.quick per task: the same all dispatch long
        for i, child in enumerate(ahead.fleet.children):
            if not ahead.serving(child) or not self._may_take(child):
                continue
            load = child.load
            if load == 0 or (load <= self.depth and ahead.may_queue_behind(child, now)):
                self._index[child] = i
                self._heap.append((load, i, child))
        heapq.heapify(self._heap)

    def _may_take(self, child: Child) -> bool:
        return self.max_tasks is None or child.assigned < self.max_tasks

    def pick(self, size: int) -> Child | None:
        """An idle child, else the least loaded (the first in the fleet on a tie) with room
        for ``size`` bytes; None when none may. Call :meth:`took` after assigning to it."""
        skipped: list[tuple[int, int, Child]] = []
        chosen: Child | None = None
        while self._heap:
            item = heapq.heappop(self._heap)
            load, _, child = item
            if load == 0 or child.ahead_bytes + size <= AHEAD_BYTES:
                chosen = child
                break
            skipped.append(item)
        for item in skipped:
            heapq.heappush(self._heap, item)
        return chosen

    def took(self, child: Child, task: str) -> None:
        """``child`` got a job of ``task``: it competes again with its new load, if it may
        hold more (nothing goes behind a task not known to be quick)."""
        quick = self._quick.get(task)
        if quick is None:
            quick = self._quick[task] = self._ahead.quick(task, self._now)
        if quick and child.load <= self.depth and self._may_take(child):
            heapq.heappush(self._heap, (child.load, self._index[child], child))
