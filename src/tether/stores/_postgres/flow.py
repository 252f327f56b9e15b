"""A PostgreSQL claim with flow limits (issue #19): the rules of :meth:`Leases.claim`, run in
one transaction on one connection (statements in ``flow.sql``).

Serialisation: the transaction first takes one transaction-level advisory lock
(``pg_advisory_xact_lock``), so two limited claims never both take a group's last slot; the
commit releases it, which is why this works behind PgBouncer's transaction pooling (no session
state, no session lock). Every count is read by a new statement after the lock, so under READ
COMMITTED it sees what the previous holder committed.

Cost with a long backlog behind a key at its limit: the groups (queue, task, limit_key) are
found by a loose index scan of ``jobs_flow_idx`` (one seek per group), and only the groups with
room have their first jobs read, at most their remaining room: O(groups + jobs taken) index
steps, never the length of a blocked key's backlog, and no horizon. The choice itself
(eligibility, rotation rank, start groups) is :mod:`tether.stores._flow`'s, shared with the
memory and SQLite stores.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from tether.stores._flow import Cell, FlowBook, longest_window, ranked, rate_groups
from tether.stores._postgres.connection import Conn
from tether.stores._postgres.plumbing import Plumbing, Row
from tether.stores._records import FlowLimit


def lock_key(schema: str) -> int:
    """The advisory lock key of the schema's limited claims (apart from the done/jobs keys,
    which are the crc32 of channel names)."""
    return zlib.crc32(f"{schema}\x1fflow".encode())


def _key(fkey: str) -> str | None:
    """The limit_key of a group as flow.sql spells it: '' no key, '=' + key."""
    return None if fkey == "" else fkey[1:]


def _range(limit: FlowLimit) -> tuple[str, str]:
    """[lo, hi) of the start-log groups of ``limit`` (bytewise): its one group, or every
    per-key group (``base\\x1f`` for no key, ``base\\x1f=<key>``; ``>`` follows ``=``). Not
    :func:`tether.stores._flow.group_range`: PostgreSQL text cannot hold its ``\\x00``."""
    base = limit.group(None)
    if not limit.per_key:
        return base, base + "\x01"
    return base, base[:-1] + "\x1f>"


def flow_claim(
    store: Plumbing, flow: Sequence[FlowLimit], queues: Sequence[str], params: dict[str, Any],
) -> list[Row]:
    """Choose, grant and record one limited claim; the granted rows (or, for a replay, the
    jobs still running under its request id). ``params``: the plain claim's."""
    with store._connector.connection() as conn, conn.transaction():
        return _claim(store, conn, flow, list(dict.fromkeys(queues)), params)


def _claim(
    store: Plumbing, conn: Conn, flow: Sequence[FlowLimit], queues: list[str],
    params: dict[str, Any],
) -> list[Row]:
    def run(name: str, args: dict[str, Any]) -> list[Row]:
        return store._rows(name, args, conn)

    limit: int = params["limit"]
    if params["request"] is not None:
        prior = run("flow_prior", params)
        if prior:
            return [row[:-1] for row in prior if row[-1]]
    ((_, now),) = run("flow_lock", {"key": lock_key(store.schema), "now": params["now"]})
    running = {(str(t), str(q), k): int(n) for t, q, k, n in run("flow_running", {
        "tasks": sorted({f.name for f in flow if f.scope == "task"}),
        "queues": sorted({f.name for f in flow if f.scope == "queue"})})}
    started: dict[tuple[int, str], int] = {}
    rates = rate_groups(flow)
    if rates:
        ranges = [_range(lim) for _, lim in rates]
        for i, grp, n in run("flow_started", {
                "now": now, "idx": [i for i, _ in rates], "lo": [lo for lo, _ in ranges],
                "hi": [hi for _, hi in ranges], "per": [float(lim.per) for _, lim in rates]}):
            started[(int(i), str(grp))] = int(n)
    book = FlowBook(flow, running, started)
    open_queues = [q for q in queues if not book.queue_shut(q)]
    if not open_queues:
        return []
    groups: list[tuple[str, str, str, int]] = []
    for queue, task, fkey in run("flow_groups", {"queues": open_queues}):
        cell: Cell = (str(task), str(queue), _key(str(fkey)))
        room = book.room(*cell, limit)
        if room > 0:
            groups.append((str(queue), str(task), str(fkey), room))
    if not groups:
        return []
    heads: list[tuple[int, float, int, str, str | None]] = []
    cells: dict[int, Cell] = {}
    for job_id, priority, run_at, task, queue, fkey in run("flow_heads", {
            "now": now, "queues": [g[0] for g in groups], "tasks": [g[1] for g in groups],
            "fkeys": [g[2] for g in groups], "caps": [g[3] for g in groups]}):
        key = _key(str(fkey))
        heads.append((int(priority), float(run_at), int(job_id), str(task), key))
        cells[int(job_id)] = (str(task), str(queue), key)
    rank = ranked((h[0], h[1], h[2], cells[h[2]][:2], h[4]) for h in heads)
    heads.sort(key=lambda h: (h[0], rank[h[2]], h[1], h[2]))
    chosen: list[int] = []
    start_ids: list[int] = []
    start_groups: list[str] = []
    for _, _, job_id, _, _ in heads:
        if len(chosen) == limit:
            break
        if book.take(*cells[job_id]):
            chosen.append(job_id)
            for grp in sorted(book.starts(*cells[job_id])):
                start_ids.append(job_id)
                start_groups.append(grp)
    if not chosen:
        return []
    windows: dict[str, float] = {}
    for grp in set(start_groups):
        for _, lim in rates:
            lo, hi = _range(lim)
            if lo <= grp < hi:
                windows[grp] = max(windows.get(grp, 0.0), longest_window(flow, lim))
    return run("flow_take", {
        **params, "now": now, "ids": chosen, "start_ids": start_ids,
        "start_groups": start_groups, "drop_groups": list(windows),
        "drop_per": list(windows.values())})


__all__ = ["flow_claim", "lock_key"]
