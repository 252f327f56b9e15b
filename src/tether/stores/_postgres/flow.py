"""A PostgreSQL claim with flow limits (issue #19): the rules of :meth:`Leases.claim`, run by
one server function (``flow_claim``, migration 0007, redefined by 0009) in one statement and
one round trip.

Why on the server: choosing needs the first jobs of every (queue, task, key) group of the
claimed queues that has room (for 100 keys, ~200 rows) to grant ~10. Run as seven statements
with the choice in Python between them (schema 6), the round trips and the rows turned into
Python objects cost more than the index reads, and a limited drain ran at about half the plain
one's speed. The function sends back only the granted jobs.

Serialisation: the function first takes one transaction-level advisory lock
(``pg_advisory_xact_lock`` on :func:`lock_key`), so two limited claims never both take a
group's last slot; the commit of the calling statement (autocommit) releases it, which is why
this works behind PgBouncer's transaction pooling (no session state, no session lock). Every
count is a later statement of the VOLATILE function, so under READ COMMITTED it sees what the
previous holder committed.

Cost: a claim first offers the first due jobs of its queues in claim order (about twice its
limit, from the plain claim's index), and keeps that choice when no job left out could come
before the last one it took, which the function checks. When, besides, no slot that may bind
is shared by two groups (a per-key limit's slots never are within one queue), that whole
choice is one set-based statement (0009): each group's first jobs up to its room, the first
``limit`` of them in claim order. That cuts what a limited claim costs the server beyond a
plain one by about a third (0007's counts, arrays and per-row loop still run when the
shortcut does not hold). Else (say, a key at its limit
with a long backlog first in line) it walks the groups of ``jobs_flow_idx`` with a loose
index scan, one seek per group, and reads only the first jobs of the groups with room, at
most their remaining room: O(groups + jobs taken) index steps, never the length of a blocked
key's backlog, and no horizon. The memory and SQLite stores make the same choice in Python
(:mod:`tether.stores._flow`); tests/contract/test_flow.py (the rules, literally) and
tests/postgres/test_flow_function.py (against that Python choice) hold the function to it.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from tether.stores._postgres.plumbing import Plumbing, Row
from tether.stores._records import FlowLimit


def lock_key(schema: str) -> int:
    """The advisory lock key of the schema's limited claims (apart from the done/jobs keys,
    which are the crc32 of channel names)."""
    return zlib.crc32(f"{schema}\x1fflow".encode())


def flow_claim(
    store: Plumbing, flow: Sequence[FlowLimit], queues: Sequence[str], params: dict[str, Any],
) -> list[Row]:
    """Choose, grant and record one limited claim; the granted rows (or, for a replay, the
    jobs still running under its request id). ``params``: the plain claim's. The limits go as
    one array per field, in ``flow``'s order; ``pre`` is each limit's ``group(None)``, which
    the function extends with a job's key for a per-key limit, so its start-log groups are
    :meth:`FlowLimit.group`'s."""
    return store._rows("flow_claim", {
        **params, "key": lock_key(store.schema), "queues": list(dict.fromkeys(queues)),
        "scope": [f.scope for f in flow], "name": [f.name for f in flow],
        "conc": [f.concurrency for f in flow], "rate": [f.rate for f in flow],
        "per": [float(f.per) for f in flow], "per_key": [f.per_key for f in flow],
        "pre": [f.group(None) for f in flow]})


__all__ = ["flow_claim", "lock_key"]
