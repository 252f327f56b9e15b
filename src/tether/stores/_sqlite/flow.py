"""A SQLite claim with flow limits (issue #19): the rules of :meth:`Leases.claim`, run inside
the claim's write transaction (``BEGIN IMMEDIATE`` serialises every claimer, so two limited
claims never take a group's last slot).

The usual way is :mod:`flow_walk <tether.stores._sqlite.flow_walk>`: the queues' due jobs in
claim order through ``jobs_claim``, taken as they come; with keys that have room it reads
about as many rows as the claim takes. It gives up after a few rows per job asked for (a long
run of jobs of keys at their limit), and then the ways below choose.

How they stay cheap with a long backlog behind a key at its limit: the partial index
``jobs_flow`` (queue, task, limit_key, priority, run_at, id) on pending *keyed* rows is walked
as a loose index scan, one seek per (queue, task, limit_key) group, and only the groups with
room have their first ``limit`` due jobs read: O(groups + groups with room x limit) index
steps, never the length of a blocked key's backlog. Jobs without a key are not in that index
(so an application without keys pays nothing for it on enqueue and plain claims); they are
read from ``jobs_claim`` in claim order, at most :data:`HORIZON` due jobs per queue, skipping
the tasks whose unkeyed jobs cannot be taken (the bound the contract lets a store document).
The choice itself (eligibility, rotation rank, start groups) is :mod:`tether.stores._flow`'s,
shared with the memory store.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tether.stores import _queries as queries
from tether.stores._flow import Cell, FlowBook, group_range, longest_window, ranked, rate_groups
from tether.stores._records import FlowLimit
from tether.stores._sqlite.flow_walk import walk_claim

F = queries.load("tether.stores._sqlite", "flow.sql")
#: How many due jobs of a queue a limited claim looks at for jobs without a limit_key (read
#: in claim order from jobs_claim; keyed jobs are found through jobs_flow, unbounded). The
#: contract's floor for a store that bounds how far it looks.
HORIZON = 5_000


def _keyed_groups(cur: sqlite3.Cursor, queue: str, book: FlowBook) -> Iterator[Cell]:
    """Every (task, queue, limit_key) with keyed pending jobs in ``queue`` whose task is not
    shut by a limit on the whole task: the loose index scan of jobs_flow."""
    row = cur.execute(F["flow_first_group"], {"queue": queue}).fetchone()
    while row is not None:
        task: str = row[0]
        if not book.shut(task, queue):
            key: str | None = row[1]
            while key is not None:
                yield task, queue, key
                found = cur.execute(F["flow_next_key"],
                                    {"queue": queue, "task": task, "after": key}).fetchone()
                key = None if found is None else found[0]
        row = cur.execute(F["flow_next_task"], {"queue": queue, "after": task}).fetchone()


Head = tuple[int, float, int, str, "str | None"]  # (priority, run_at, id, task, limit_key)


def _unkeyed(cur: sqlite3.Cursor, flow: Sequence[FlowLimit], book: FlowBook, queue: str,
             now: float, limit: int, heads: list[Head], cells: dict[int, Cell]) -> None:
    """Add the queue's due jobs without a key that could be taken (see flow_unkeyed)."""
    shut = sorted({limit_.name for limit_ in flow if limit_.scope == "task"
                   and not book.eligible(limit_.name, queue, None)})
    args = {"queue": queue, "now": now, "limit": limit, "horizon": HORIZON,
            "shut": json.dumps(shut)}
    for job_id, priority, run_at, task in cur.execute(F["flow_unkeyed"], args):
        heads.append((priority, run_at, job_id, task, None))
        cells[job_id] = (task, queue, None)


def _choose(book: FlowBook, heads: list[Head], cells: dict[int, Cell], limit: int,
            rank: dict[int, int] | None) \
        -> tuple[list[int], list[str], tuple[int, float, int] | None]:
    """Take eligible jobs in (priority, rank, run_at, id) order up to ``limit``; returns the
    ids, their start groups, and (priority, run_at, id) of the job that filled the claim
    (None when the candidates ran out first)."""
    order = sorted(heads, key=lambda h: (h[0], 1 if rank is None else rank[h[2]], h[1], h[2]))
    chosen: list[int] = []
    starts: list[str] = []
    for priority, run_at, job_id, _, _ in order:
        if book.take(*cells[job_id]):
            chosen.append(job_id)
            starts.extend(book.starts(*cells[job_id]))
            if len(chosen) == limit:
                return chosen, starts, (priority, run_at, job_id)
    return chosen, starts, None


def _unkeyed_before(cur: sqlite3.Cursor, flow: Sequence[FlowLimit], book: FlowBook,
                    queue: str, now: float, limit: int, cut: tuple[int, float, int] | None,
                    heads: list[Head], cells: dict[int, Cell]) -> None:
    """Add the queue's due jobs without a key that come before ``cut`` in claim order (all
    of them, to :data:`HORIZON`, when None), at most ``limit`` per task, skipping tasks
    whose unkeyed jobs cannot be taken. Reads rows only up to ``cut``: when every job is
    keyed, a few rows instead of the whole horizon."""
    shut = {limit_.name for limit_ in flow if limit_.scope == "task"
            and not book.eligible(limit_.name, queue, None)}
    per_task: dict[str, int] = {}
    rows = cur.execute(F["flow_walk"], {"queue": queue, "now": now, "limit": HORIZON})
    for priority, run_at, job_id, task, key, _ in rows:
        if cut is not None and (priority, run_at, job_id) > cut:
            break
        if key is not None or task in shut or per_task.get(task, 0) >= limit:
            continue
        per_task[task] = per_task.get(task, 0) + 1
        heads.append((priority, run_at, job_id, task, None))
        cells[job_id] = (task, queue, None)


def _first_jobs(cur: sqlite3.Cursor, flow: Sequence[FlowLimit],
                book: Callable[[], FlowBook], queues: Sequence[str], now: float,
                limit: int) -> tuple[list[int], list[str]] | None:
    """The claim from every keyed group's first due job (one statement per queue) and the
    unkeyed jobs before where those fill the claim, when that is provably the claim the rules
    give; None when later jobs of some group might belong in it (the claim did not fill up,
    or a group's first job is more urgent than where it filled up: its second could come
    before the last ones taken) or unkeyed jobs past what was read might."""
    keyed: list[Head] = []
    cells: dict[int, Cell] = {}
    first = book()
    open_queues = [q for q in queues if not first.queue_shut(q)]
    for queue in open_queues:
        for job_id, task, key, priority, run_at in cur.execute(
                F["flow_group_heads"], {"queue": queue, "now": now}):
            if first.eligible(task, queue, key):
                keyed.append((priority, run_at, job_id, task, key))
                cells[job_id] = (task, queue, key)
    _, _, cut_keyed = _choose(book(), keyed, cells, limit, None)
    heads = list(keyed)
    for queue in open_queues:
        _unkeyed_before(cur, flow, first, queue, now, limit, cut_keyed, heads, cells)
    chosen, starts, cut = _choose(book(), heads, cells, limit, None)
    if cut is None or (cut_keyed is not None and cut > cut_keyed):
        return None
    if keyed and min(h[0] for h in keyed) < cut[0]:
        return None
    return chosen, starts


def flow_claim(
    conn: sqlite3.Connection,
    flow: Sequence[FlowLimit],
    queues: Sequence[str],
    params: dict[str, Any],
) -> list[Any]:
    """Choose, grant and record one limited claim; returns the granted rows. ``params``: the
    plain claim's (owner, limit, lease_ttl, nonce, now), ``now`` already the store's time.

    Three ways to choose, one result. First the queues' due jobs in claim order, taken as
    they come (flow_walk.py: with keys that have room, the common case, about as many rows as
    the claim takes); when that would read more than a few rows per job asked for (a long run
    of jobs that cannot be taken), from every keyed group's first due job (one statement per
    queue; right when those fill the claim); else the per-group walk, which reads each group
    with room up to ``limit`` jobs (the rotation needs their ranks)."""
    now: float = params["now"]
    limit: int = params["limit"]
    cur = conn.cursor()
    (groups,) = cur.execute(F["flow_running"]).fetchone()
    running = {(task, queue, key): int(n) for task, queue, key, n in json.loads(groups)}
    started: dict[tuple[int, str], int] = {}
    for i, rate in rate_groups(flow):
        lo, hi = group_range(rate)
        for grp, n in cur.execute(F["flow_started"], {"lo": lo, "hi": hi, "now": now,
                                                      "since": now - rate.per}):
            started[(i, grp)] = int(n)
    base = FlowBook(flow, running, started)
    quick = walk_claim(conn, base.fresh(), [q for q in queues if not base.queue_shut(q)],
                       now, limit)
    if quick is None:
        quick = _first_jobs(cur, flow, base.fresh, queues, now, limit)
    if quick is not None:
        chosen, starts = quick
    else:
        book = base.fresh()
        heads: list[Head] = []
        cells: dict[int, Cell] = {}
        for queue in queues:
            if book.queue_shut(queue):
                continue
            for task, q, key in list(_keyed_groups(cur, queue, book)):
                room = book.room(task, q, key, limit)
                if room <= 0:
                    continue
                args = {"queue": q, "task": task, "key": key, "now": now, "limit": room}
                for job_id, priority, run_at in cur.execute(F["flow_heads"], args):
                    heads.append((priority, run_at, job_id, task, key))
                    cells[job_id] = (task, q, key)
            _unkeyed(cur, flow, book, queue, now, limit, heads, cells)
        rank = ranked((h[0], h[1], h[2], cells[h[2]][:2], h[4]) for h in heads)
        chosen, starts, _ = _choose(book, heads, cells, limit, rank)
    if not chosen:
        return []
    rows = cur.execute(F["flow_claim"], {**params, "ids": json.dumps(chosen)}).fetchall()
    if starts:
        cur.execute(F["flow_record_starts"], {"groups": json.dumps(starts), "now": now})
        windows = {g: longest_window(flow, rate) for _, rate in rate_groups(flow)
                   for g in set(starts) if group_range(rate)[0] <= g < group_range(rate)[1]}
        for grp, per in windows.items():
            cur.execute(F["flow_drop_starts"], {"grp": grp, "horizon": now - per})
    return rows


__all__ = ["flow_claim"]
