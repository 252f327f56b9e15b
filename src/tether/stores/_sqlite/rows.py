"""Shared pieces of the SQLite store: its named queries, the store clock, row conversion, the
request-id check."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from tether._limits import check_json_text, check_text
from tether._text import clean_optional
from tether.stores import _queries as queries
from tether.stores._contract import JobRecord, Lease, Outcome
from tether.stores._records import job_of, slot_builder

SCHEMA_VERSION = 8
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


#: The claim's RETURNING (queries.sql, claim): JobRecord's fields less the six the claim set.
_CLAIM_COLUMNS = ("id", "task", "queue", "payload", "priority", "run_at", "attempt",
                  "max_attempts", "failures", "stall_count", "max_stalls", "interruptions",
                  "created_at", "finished_at", "last_error", "failure_reason", "result",
                  "checkpoint", "progress", "unique_key", "errors", "uid", "limit_key", "snoozes")
#: Sorted on (priority, run_at, id) before they are made into jobs.
_CLAIM_ORDER = itemgetter(4, 5, 0)
#: One claimed job from its slim row and what the claim set (slot_builder: no frozen
#: dataclass __init__, no intermediate full tuple).
_claimed_job = slot_builder(
    JobRecord, "claimed_job", "r, owner, lease_until, now, nonce",
    {**{name: f"r[{i}]" for i, name in enumerate(_CLAIM_COLUMNS)},
     "status": "'running'", "locked_by": "owner", "lease_until": "lease_until",
     "started_at": "now", "cancel_requested": "False", "lease_token": "f'{nonce}:{r[0]}'"})


def claimed_jobs(rows: list[Any], owner: str, now: float, lease_until: float,
                 nonce: str) -> list[JobRecord]:
    """The jobs of a plain claim, in claim order, from its slim RETURNING rows: the six fields
    the claim itself set are filled in here with the values the statement wrote (status
    running, this owner, ``now + lease_ttl``, ``now``, no cancel request, ``nonce:id``),
    so each job equals what ``get_job`` reads back (issue #23: SQLite copied 30 columns per
    job, Python converted them)."""
    rows.sort(key=_CLAIM_ORDER)
    build = _claimed_job
    return [build(r, owner, lease_until, now, nonce) for r in rows]


def _error_text(o: Outcome) -> str | None:
    """The outcome's cleaned error text; a snooze is always on record (``"snoozed"``)."""
    error = clean_optional(o.error)
    return "snoozed" if error is None and o.kind == "snoozed" else error


class FinishPlan:
    """One ``finish`` call made ready before its transaction (no work inside the write lock).

    ``sent``: the parameters of the ``finish`` statement (queries.sql) for each distinct
    outcome, in the order given, without the store time (:meth:`bound` appends it). Run in
    that order, one outcome after the other, a stale outcome for a job does not hide a valid
    one after it, and a second, *different* outcome for a job whose first one applied finds
    it no longer running and is turned down. The exact same outcome (same lease, same kind)
    twice is sent once and reported like its first copy.
    """

    def __init__(self, outcomes: Sequence[Outcome]) -> None:
        for o in outcomes:  # the whole batch is checked before anything is written
            if o.result is not None:
                check_json_text(o.result, "result")
        self.outcomes = outcomes
        #: Per outcome: the index in ``sent`` of the copy that is sent.
        self.slots: list[int] = []
        self.sent: list[tuple[Any, ...]] = []
        # Keyed by the lease's fields, not the Lease: a tuple of builtins hashes in C, the
        # dataclass's __hash__ is a Python call per outcome.
        index: dict[tuple[int, int, str, str, str], int] = {}
        for o in outcomes:
            lease = o.lease
            key = (lease.job_id, lease.attempt, lease.owner, lease.token, o.kind)
            slot = index.get(key)
            if slot is None:
                slot = index[key] = len(self.sent)
                self.sent.append((lease.job_id, lease.attempt, lease.owner, lease.token,
                                  o.kind, o.result, _error_text(o),
                                  o.reason or _DEFAULT_REASON[o.kind], float(o.retry_delay)))
            self.slots.append(slot)

    def bound(self, now: float) -> list[tuple[Any, ...]]:
        """``sent`` with the store time appended (parameter 10), once it is known."""
        tail = (now,)
        return [params + tail for params in self.sent]

    def split(self, now: float) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """:meth:`bound`, the done outcomes apart (their own, leaner statement). The order
        between the two lists only matters for two outcomes of one job, and then not both
        can apply: the caller runs the batch again in order (see SQLiteLeases.finish)."""
        tail = (now,)
        done: list[tuple[Any, ...]] = []
        other: list[tuple[Any, ...]] = []
        for params in self.sent:
            (done if params[4] == "done" else other).append(params + tail)
        return done, other

    def ids(self, applied: Sequence[int]) -> str:
        """JSON of the job ids of the sent outcomes ``applied`` (indexes in ``sent``)."""
        return json.dumps([self.sent[i][0] for i in applied])

    def unapplied(self, accepted: set[int]) -> str | None:
        """JSON [id, attempt, owner, token, kind] of the turned-down outcomes that may be
        replays of an outcome this lease already applied (none of this call's outcomes for
        that job was applied now: a second, different outcome next to an applied one stays
        rejected)."""
        applied_jobs = {self.sent[i][0] for i in accepted}
        maybe = [
            [o.lease.job_id, o.lease.attempt, o.lease.owner, o.lease.token, o.kind]
            for o, slot in zip(self.outcomes, self.slots, strict=True)
            if slot not in accepted and o.lease.job_id not in applied_jobs and o.lease.token
        ]
        return json.dumps(maybe) if maybe else None

    def rejected(
        self, accepted: set[int], replayed: set[tuple[int, int, str, str, str]]
    ) -> list[Lease]:
        """The leases of outcomes neither applied now nor recognised as applied before."""
        return [
            o.lease
            for o, slot in zip(self.outcomes, self.slots, strict=True)
            if slot not in accepted
            and (o.lease.job_id, o.lease.attempt, o.lease.owner, o.lease.token, o.kind)
            not in replayed
        ]
