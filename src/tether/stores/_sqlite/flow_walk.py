"""The first way a SQLite limited claim chooses (issue #19): read the queues' due jobs once, in
claim order, straight from ``jobs_claim`` (the plain claim's index), and take them as they
come.

Why this is the claim the rules give, not an approximation: in (priority, run_at, id) order a
keyed job's *rank* (its position among the due pending jobs of its (queue, task, limit_key))
is how many jobs of its group the walk has met so far, itself included, so it is known the
moment the job is read. The claim order is (priority, rank, run_at, id): within one priority
the rank-1 jobs (every job without a key, every group's first) come in the walk's own order,
before any rank 2, so each is taken or skipped when read, and the claim is done as soon as it
fills. Jobs of rank 2 or more wait until the walk leaves their priority (then every job of
that priority has been read) and are taken in (rank, run_at, id) order. Eligibility only ever
goes from yes to no as a claim takes jobs (:meth:`FlowBook.take_cell`), so taking in that
order is exactly taking every due job in claim order, eligible ones only, until the claim is
full; when the walk runs out of due jobs it has read every one of them.

Why it is the fast way: with keys that have room, the common case, it reads about as many
rows as the claim takes (the plain claim's cost, plus one :class:`FlowBook` check per row),
where reading every keyed group's first job costs a seek per group, however few the claim
needs. Its one weakness is a long run of jobs that cannot be taken (a key at its limit with
thousands queued in front): it gives up after :func:`bound` rows and the caller falls back to
the index of keyed groups, whose cost does not depend on a backlog's length. So the rows read
here are bounded by the claim's size, never by the backlog.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterator, Sequence

from tether.stores import _queries as queries
from tether.stores._flow import Cell, FlowBook

F = queries.load("tether.stores._sqlite", "flow.sql")
#: Rows the walk reads at most: this many per job the claim asks for, and at least
#: :data:`WALK_MIN` (a small claim behind a few keys at their limit still fits).
WALK_PER_JOB = 4
WALK_MIN = 256

Row = tuple[int, float, int, str, "str | None", str]  # priority, run_at, id, task, key, queue


def bound(limit: int) -> int:
    """How many due jobs the walk reads before it gives up (the fallback takes over)."""
    return max(WALK_MIN, WALK_PER_JOB * limit)


def _rows(conn: sqlite3.Connection, queues: Sequence[str], now: float,
          most: int) -> Iterator[Row]:
    """The queues' due jobs in claim order, each queue read lazily (only as far as the walk
    goes), merged on (priority, run_at, id) (ids are unique, so the merge never compares
    further)."""
    streams: list[Iterator[Row]] = [
        conn.execute(F["flow_walk"], {"queue": q, "now": now, "limit": most})
        for q in queues]
    return streams[0] if len(streams) == 1 else heapq.merge(*streams)


def walk_claim(conn: sqlite3.Connection, book: FlowBook, queues: Sequence[str], now: float,
               limit: int) -> tuple[list[int], list[str]] | None:
    """The claim (ids, start groups) read in one pass over the due jobs of ``queues`` (those
    no limit on a whole queue shuts), or None when that needs more than :func:`bound` rows."""
    most = bound(limit)
    chosen: list[int] = []
    starts: list[str] = []
    seen: dict[Cell, int] = {}
    later: list[tuple[int, float, int, Cell]] = []  # rank >= 2 of the current priority
    level: int | None = None
    take = book.take_cell

    def close_level() -> bool:
        """Every job of the current priority is read: take its later ranks in order; True
        once the claim is full."""
        later.sort()
        for _, _, job_id, cell in later:
            got = take(cell)
            if got is not None:
                chosen.append(job_id)
                starts.extend(got)
                if len(chosen) == limit:
                    return True
        later.clear()
        return False

    rows = _rows(conn, queues, now, most + 1)
    for read, (priority, run_at, job_id, task, key, queue) in enumerate(rows, 1):
        if read > most:
            return None
        if priority != level:
            if later and close_level():
                return chosen, starts
            level = priority
        cell = (task, queue, key)
        if key is not None:
            rank = seen[cell] = seen.get(cell, 0) + 1
            if rank > 1:
                later.append((rank, run_at, job_id, cell))
                continue
        got = take(cell)
        if got is not None:
            chosen.append(job_id)
            if got:
                starts.extend(got)
            if len(chosen) == limit:
                return chosen, starts
    if later:
        close_level()
    return chosen, starts


__all__ = ["bound", "walk_claim"]
