"""The bookkeeping of a claim with flow limits (issue #19), shared by the stores that choose
jobs in Python (memory, SQLite): which limits apply to a job, whether it is eligible, what
taking it uses up, and the rotation order. The rules are :meth:`Leases.claim`'s.

A store feeds :class:`FlowBook` what it holds (running jobs per (task, queue, limit_key), the
starts recorded per rate group in each limit's window) and walks its candidates in
:func:`flow_order`; :meth:`FlowBook.take` says yes or no per job and counts what it took, so
every limit holds across the jobs of one claim.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence

from tether.stores._records import FlowLimit

#: (task, queue, limit_key): the finest partition every limit's group is a union of.
Cell = tuple[str, str, "str | None"]


def longest_window(flow: Sequence[FlowLimit], limit: FlowLimit) -> float:
    """The longest ``per`` of the rate limits of ``flow`` on ``limit``'s scope and name: its
    start records older than that may be dropped (limits on one name share the log)."""
    return max(float(other.per) for other in flow if other.rate is not None
               and (other.scope, other.name) == (limit.scope, limit.name))


class FlowBook:
    """Counts of one claim: ``running`` per cell, ``started`` per (limit index, group) in
    that limit's window, and what this claim took."""

    def __init__(
        self,
        flow: Sequence[FlowLimit],
        running: Mapping[Cell, int],
        started: Mapping[tuple[int, str], int],
    ) -> None:
        self.flow = list(flow)
        self.started = dict(started)
        self.taken: Counter[tuple[int, str]] = Counter()
        self.running: Counter[tuple[int, str]] = Counter()
        self._cache: dict[tuple[str, str], list[tuple[int, FlowLimit]]] = {}
        for (task, queue, key), n in running.items():
            for i, limit in self.applying(task, queue):
                self.running[(i, limit.group(key))] += n

    def fresh(self) -> FlowBook:
        """The same counts with nothing taken yet: a store that tries one choice and may
        fall back to another starts each from here (cheaper than counting again)."""
        book = object.__new__(FlowBook)
        book.flow, book.started, book.running = self.flow, self.started, self.running
        book._cache = self._cache
        book.taken = Counter()
        return book

    def _applying(self, task: str, queue: str) -> list[tuple[int, FlowLimit]]:
        return [(i, limit) for i, limit in enumerate(self.flow) if limit.applies(task, queue)]

    def applying(self, task: str, queue: str) -> list[tuple[int, FlowLimit]]:
        """The limits (with their index in ``flow``) that apply to jobs of (task, queue)."""
        found = self._cache.get((task, queue))
        if found is None:
            found = self._cache[(task, queue)] = self._applying(task, queue)
        return found

    def full(self, i: int, limit: FlowLimit, key: str | None) -> bool:
        """Whether ``limit`` (``flow[i]``) has no room left for one more job of ``key``'s
        group: its running jobs or its window's starts, with this claim's, reach it."""
        g = (i, limit.group(key))
        used = self.taken[g]
        if limit.concurrency is not None and self.running[g] + used >= limit.concurrency:
            return True
        return limit.rate is not None and self.started.get(g, 0) + used >= limit.rate

    def room(self, task: str, queue: str, key: str | None, limit: int) -> int:
        """How many jobs of this cell one claim could take at most, before any is taken:
        what a store needs to read of the cell's backlog (a key with 2 free slots, 2 rows)."""
        room = limit
        for i, lim in self.applying(task, queue):
            g = (i, lim.group(key))
            if lim.concurrency is not None:
                room = min(room, lim.concurrency - self.running[g])
            if lim.rate is not None:
                room = min(room, lim.rate - self.started.get(g, 0))
        return room

    def eligible(self, task: str, queue: str, key: str | None) -> bool:
        """Whether one more job of this cell fits every limit that applies to it."""
        return not any(self.full(i, limit, key) for i, limit in self.applying(task, queue))

    def queue_shut(self, queue: str) -> bool:
        """Whether a limit on the whole queue is full: nothing of it can be taken."""
        return any(self.full(i, limit, None) for i, limit in enumerate(self.flow)
                   if limit.scope == "queue" and limit.name == queue)

    def shut(self, task: str, queue: str) -> bool:
        """Whether a limit on all of (task, queue) (not per key) is full: no job of the pair
        can be taken this claim, whatever its key, so a store need not look at their keys."""
        return any(self.full(i, limit, None) for i, limit in self.applying(task, queue)
                   if not limit.per_key)

    def take(self, task: str, queue: str, key: str | None) -> bool:
        """Take one job of this cell if it is eligible (and count it); False otherwise."""
        if not self.eligible(task, queue, key):
            return False
        for i, limit in self.applying(task, queue):
            self.taken[(i, limit.group(key))] += 1
        return True

    def starts(self, task: str, queue: str, key: str | None) -> set[str]:
        """The start-log groups one claimed job of this cell records a start in (each once,
        even when two rate limits share a group)."""
        return {limit.group(key) for _, limit in self.applying(task, queue)
                if limit.rate is not None}


def rate_groups(flow: Sequence[FlowLimit]) -> list[tuple[int, FlowLimit]]:
    """The rate limits of ``flow`` with their index."""
    return [(i, limit) for i, limit in enumerate(flow) if limit.rate is not None]


def group_range(limit: FlowLimit) -> tuple[str, str]:
    """[lo, hi) of the start-log group names of ``limit``: its one group, or every per-key
    group (``base\\x1f`` for no key, ``base\\x1f=<key>`` otherwise; ``>`` follows ``=``)."""
    if not limit.per_key:
        g = limit.group(None)
        return g, g + "\x00"
    base = limit.group(None)
    return base, base[:-1] + "\x1f>"


def ranked(
    jobs: Iterable[tuple[int, float, int, Hashable, str | None]],
) -> dict[int, int]:
    """Rank of each job (priority, run_at, id, where, limit_key): 1 without a key, else its
    1-based position among the given jobs of its (where, limit_key) in (priority, run_at, id)
    order. ``where`` is the job's (queue, task): keys rotate within a queue."""
    seen: Counter[tuple[Hashable, str]] = Counter()
    out: dict[int, int] = {}
    for _, _, job_id, where, key in sorted(jobs, key=lambda j: (j[0], j[1], j[2])):
        if key is None:
            out[job_id] = 1
        else:
            seen[(where, key)] += 1
            out[job_id] = seen[(where, key)]
    return out


__all__ = ["Cell", "FlowBook", "group_range", "longest_window", "ranked", "rate_groups"]
