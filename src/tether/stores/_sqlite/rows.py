"""Shared pieces of the SQLite store: its named queries, the store clock, row conversion, the
request-id check."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from tether._limits import check_json_text, check_text
from tether._text import clean_optional
from tether.stores import _queries as queries
from tether.stores._contract import JobRecord, Lease, Outcome
from tether.stores._records import job_of

SCHEMA_VERSION = 7
Q = queries.load("tether.stores._sqlite", "queries.sql")
#: The operations' statements (issue #11): search, purge, pause, dead workers, the leader.
OPS = queries.load("tether.stores._sqlite", "ops.sql")
#: Death detection's write (issue #22): the reap of a dead owner's jobs.
LIVE = queries.load("tether.stores._sqlite", "liveness.sql")
#: The schema steps by version: version 1 is schema.sql, every later one schema_vN.sql.
SCHEMA_STEPS: dict[int, dict[str, str]] = {
    version: queries.load(
        "tether.stores._sqlite", "schema.sql" if version == 1 else f"schema_v{version}.sql"
    )
    for version in range(1, SCHEMA_VERSION + 1)
}
#: The error record's reason when the outcome gives none.
_DEFAULT_REASON = {
    "error": "error",
    "dead": "error",
    "released": "released",
    "stalled": "stalled",
    "cancelled": "cancelled",
    "done": "done",
    "snoozed": "snoozed",
}

_MAX_REQUEST_ID = 255


def checked_request_id(value: str | None) -> str | None:
    """A caller's request id, checked as every store checks it (None: the call has none)."""
    return None if value is None else check_text(value, "request_id", limit=_MAX_REQUEST_ID)


def store_now(conn: sqlite3.Connection, now: float | None) -> float:
    """The caller's explicit time, else SQLite's clock (read on ``conn``, inside whatever
    transaction is open, so it is ordered with the write it is used for)."""
    if now is not None:
        return float(now)
    value: float = conn.execute(Q["clock"]).fetchone()[0]
    return value


def job_from_row(row: Sequence[Any]) -> JobRecord:
    """A row selected with the JobRecord column list (cancel_requested is stored as 0/1)."""
    return job_of((*row[:24], row[24] == 1, *row[25:]))


def _error_text(o: Outcome) -> str | None:
    """The outcome's cleaned error text; a snooze is always on record (``"snoozed"``)."""
    error = clean_optional(o.error)
    return "snoozed" if error is None and o.kind == "snoozed" else error


class FinishPlan:
    """One ``finish`` call made ready before its transaction (no work inside the write lock).

    ``rounds``: JSON batches for the ``finish`` statement, each with distinct job ids. Within a
    round a returned id names exactly one outcome; a second, *different* outcome for the same
    job runs in a later round of the same transaction and is fenced on its own (a stale outcome
    before the valid one does not hide it). The exact same outcome (same lease, same kind)
    twice is sent once and reported like its first copy.
    """

    def __init__(self, outcomes: Sequence[Outcome]) -> None:
        for o in outcomes:  # the whole batch is checked before anything is written
            if o.result is not None:
                check_json_text(o.result, "result")
        self.outcomes = outcomes
        #: Per outcome: (round, job id) of the copy that is sent.
        self.slots: list[tuple[int, int]] = []
        rounds: list[list[list[Any]]] = []
        seen: list[set[int]] = []
        # Keyed by the lease's fields, not the Lease: a tuple of builtins hashes in C, the
        # dataclass's __hash__ is a Python call per outcome.
        sent: dict[tuple[int, int, str, str, str], tuple[int, int]] = {}
        for o in outcomes:
            lease = o.lease
            key = (lease.job_id, lease.attempt, lease.owner, lease.token, o.kind)
            if key in sent:
                self.slots.append(sent[key])
                continue
            i = 0
            while i < len(rounds) and lease.job_id in seen[i]:
                i += 1
            if i == len(rounds):
                rounds.append([])
                seen.append(set())
            rounds[i].append(
                [
                    lease.job_id,
                    lease.attempt,
                    lease.owner,
                    lease.token,
                    o.kind,
                    o.result,
                    _error_text(o),
                    o.reason or _DEFAULT_REASON[o.kind],
                    float(o.retry_delay),
                ]
            )
            seen[i].add(lease.job_id)
            sent[key] = (i, lease.job_id)
            self.slots.append(sent[key])
        self.rounds = [json.dumps(batch) for batch in rounds]

    def unapplied(self, accepted: set[tuple[int, int]]) -> str | None:
        """JSON [id, attempt, token, kind] of the turned-down outcomes that may be replays of
        an outcome this lease already applied (none of this call's outcomes for that job was
        applied now: a second, different outcome next to an applied one stays rejected)."""
        applied_jobs = {job_id for _, job_id in accepted}
        maybe = [
            [o.lease.job_id, o.lease.attempt, o.lease.token, o.kind]
            for o, slot in zip(self.outcomes, self.slots, strict=True)
            if slot not in accepted and o.lease.job_id not in applied_jobs and o.lease.token
        ]
        return json.dumps(maybe) if maybe else None

    def rejected(
        self, accepted: set[tuple[int, int]], replayed: set[tuple[int, int, str, str]]
    ) -> list[Lease]:
        """The leases of outcomes neither applied now nor recognised as applied before."""
        return [
            o.lease
            for o, slot in zip(self.outcomes, self.slots, strict=True)
            if slot not in accepted
            and (o.lease.job_id, o.lease.attempt, o.lease.token, o.kind) not in replayed
        ]
