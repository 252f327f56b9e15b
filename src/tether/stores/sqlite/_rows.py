"""Shared pieces of the SQLite store: its named queries, the store clock, row conversion."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from tether.stores import queries
from tether.stores.base import Job, Outcome

SCHEMA_VERSION = 1
Q = queries.load("tether.stores.sqlite", "queries.sql")
SCHEMA = queries.load("tether.stores.sqlite", "schema.sql")
_FAILURE_KINDS = frozenset({"error", "dead"})


def store_now(conn: sqlite3.Connection, now: float | None) -> float:
    """The caller's explicit time, else SQLite's clock (read on ``conn``, inside whatever
    transaction is open, so it is ordered with the write it is used for)."""
    if now is not None:
        return float(now)
    value: float = conn.execute(Q["clock"]).fetchone()[0]
    return value


def job_from_row(row: Sequence[Any]) -> Job:
    """A row selected with the base.Job column list (cancel_requested is stored as 0/1)."""
    return Job(*(*row[:24], row[24] == 1, row[25]))


def outcome_rows(outcomes: Sequence[Outcome]) -> list[list[list[Any]]]:
    """Outcome tuples for the ``finish`` statement, split into rounds with distinct job ids.

    Within one round a returned id names exactly one outcome; a second outcome for the same job
    (rare: a duplicate report) runs in a later round of the same transaction and is fenced out
    by the first one's write, exactly as if it had arrived later.
    """
    rounds: list[list[list[Any]]] = [[]]
    seen: list[set[int]] = [set()]
    for o in outcomes:
        lease = o.lease
        reason = o.reason
        if reason is None and o.kind in _FAILURE_KINDS:
            reason = "error"
        elif reason is None and o.kind == "stalled":
            reason = "stalled"
        row = [
            lease.job_id,
            lease.attempt,
            lease.owner,
            o.kind,
            o.result,
            o.error,
            reason,
            float(o.retry_delay),
        ]
        i = 0
        while lease.job_id in seen[i]:
            i += 1
            if i == len(rounds):
                rounds.append([])
                seen.append(set())
        rounds[i].append(row)
        seen[i].add(lease.job_id)
    return rounds
