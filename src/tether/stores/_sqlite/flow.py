"""A SQLite claim with flow limits (issue #19): the rules of :meth:`Leases.claim`, run inside
the claim's write transaction (``BEGIN IMMEDIATE`` serialises every claimer, so two limited
claims never take a group's last slot).

How it stays cheap with a long backlog behind a key at its limit: the partial index
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
from collections.abc import Iterator, Sequence
from typing import Any

from tether.stores import _queries as queries
from tether.stores._flow import Cell, FlowBook, group_range, longest_window, ranked, rate_groups
from tether.stores._records import FlowLimit

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


def flow_claim(
    conn: sqlite3.Connection,
    flow: Sequence[FlowLimit],
    queues: Sequence[str],
    params: dict[str, Any],
) -> list[Any]:
    """Choose, grant and record one limited claim; returns the granted rows. ``params``: the
    plain claim's (owner, limit, lease_ttl, nonce, now), ``now`` already the store's time."""
    now: float = params["now"]
    limit: int = params["limit"]
    cur = conn.cursor()
    running = {(r[0], r[1], r[2]): int(r[3]) for r in cur.execute(F["flow_running"])}
    started: dict[tuple[int, str], int] = {}
    for i, rate in rate_groups(flow):
        lo, hi = group_range(rate)
        for grp, n in cur.execute(F["flow_started"], {"lo": lo, "hi": hi, "now": now,
                                                      "since": now - rate.per}):
            started[(i, grp)] = int(n)
    book = FlowBook(flow, running, started)
    heads: list[tuple[int, float, int, str, str | None]] = []
    cells: dict[int, Cell] = {}
    for queue in queues:
        if book.queue_shut(queue):
            continue
        for task, q, key in list(_keyed_groups(cur, queue, book)):
            if not book.eligible(task, q, key):
                continue
            args = {"queue": q, "task": task, "key": key, "now": now, "limit": limit}
            for job_id, priority, run_at in cur.execute(F["flow_heads"], args):
                heads.append((priority, run_at, job_id, task, key))
                cells[job_id] = (task, q, key)
        shut = sorted({limit_.name for limit_ in flow if limit_.scope == "task"
                       and not book.eligible(limit_.name, queue, None)})
        args = {"queue": queue, "now": now, "limit": limit, "horizon": HORIZON,
                "shut": json.dumps(shut)}
        for job_id, priority, run_at, task in cur.execute(F["flow_unkeyed"], args):
            heads.append((priority, run_at, job_id, task, None))
            cells[job_id] = (task, queue, None)
    rank = ranked(heads)
    heads.sort(key=lambda h: (h[0], rank[h[2]], h[1], h[2]))
    chosen: list[int] = []
    starts: list[str] = []
    for _, _, job_id, _, _ in heads:
        if len(chosen) == limit:
            break
        if book.take(*cells[job_id]):
            chosen.append(job_id)
            starts.extend(book.starts(*cells[job_id]))
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
