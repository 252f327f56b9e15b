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
#: One limit that applies to a cell: ((limit index, group), concurrency, rate).
_Group = tuple[tuple[int, str], "int | None", "int | None"]
#: What one cell counts in (a _Group per limit that applies to it), and the start-log groups
#: one claimed job of it records a start in.
_Counts = tuple[tuple[_Group, ...], frozenset[str]]
_Applying = dict[tuple[str, str], list[tuple[int, FlowLimit]]]

#: What :class:`FlowBook` works out from the limits alone (which limits apply to a (task,
#: queue), the groups of each cell), per set of limits, kept from one claim to the next: a
#: worker passes the same limits with every claim and meets the same keys again, and working
#: a cell out (naming its groups builds strings) was most of a claim's Python time. Bounded:
#: at most :data:`_MEMO_FLOWS` sets of limits and :data:`_MEMO_CELLS` cells each, dropped
#: whole when full (keys come from the application's data, so their number has no bound).
#: Plain dicts of immutable values: a claim in another thread at worst works a cell out twice.
_MEMO: dict[tuple[FlowLimit, ...], tuple[_Applying, dict[Cell, _Counts]]] = {}
_MEMO_FLOWS = 16
_MEMO_CELLS = 65_536


def _memo(flow: tuple[FlowLimit, ...]) -> tuple[_Applying, dict[Cell, _Counts]]:
    found = _MEMO.get(flow)
    if found is None:
        if len(_MEMO) >= _MEMO_FLOWS:
            _MEMO.clear()
        found = _MEMO[flow] = ({}, {})
    elif len(found[1]) >= _MEMO_CELLS:
        found[1].clear()
    return found


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
        self._cache, self._cells = _memo(tuple(self.flow))
        for cell, n in running.items():
            for g, _, _ in self._counts(cell)[0]:
                self.running[g] += n

    def fresh(self) -> FlowBook:
        """The same counts with nothing taken yet: a store that tries one choice and may
        fall back to another starts each from here (cheaper than counting again)."""
        book = object.__new__(FlowBook)
        book.flow, book.started, book.running = self.flow, self.started, self.running
        book._cache, book._cells = self._cache, self._cells
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

    def _counts(self, cell: Cell) -> _Counts:
        """The groups of one cell, worked out once per cell: a claim asks about the same few
        cells for every job it looks at, and naming a group builds a string."""
        found = self._cells.get(cell)
        if found is None:
            key = cell[2]
            limits = self.applying(cell[0], cell[1])
            found = self._cells[cell] = (
                tuple(((i, lim.group(key)), lim.concurrency, lim.rate) for i, lim in limits),
                frozenset(lim.group(key) for _, lim in limits if lim.rate is not None))
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
        """Whether one more job of this cell fits every limit that applies to it (what
        :meth:`full` says of each, read from the cell's groups)."""
        return self._fits(self._counts((task, queue, key))[0])

    def _fits(self, groups: tuple[_Group, ...]) -> bool:
        taken, running, started = self.taken, self.running, self.started
        for g, concurrency, rate in groups:
            used = taken[g]
            if concurrency is not None and running[g] + used >= concurrency:
                return False
            if rate is not None and started.get(g, 0) + used >= rate:
                return False
        return True

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
        return self.take_cell((task, queue, key)) is not None

    def take_cell(self, cell: Cell) -> frozenset[str] | None:
        """:meth:`take` for a store that walks many jobs: None when the job is not eligible,
        else the groups its start is recorded in (:meth:`starts`), in one lookup."""
        groups, starts = self._counts(cell)
        if not self._fits(groups):
            return None
        taken = self.taken
        for g, _, _ in groups:
            taken[g] += 1
        return starts

    def starts(self, task: str, queue: str, key: str | None) -> frozenset[str]:
        """The start-log groups one claimed job of this cell records a start in (each once,
        even when two rate limits share a group)."""
        return self._counts((task, queue, key))[1]


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
