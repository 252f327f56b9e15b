"""A claimed job's :class:`JobRecord` from the claim statements' short row.

The claim statements (queries.sql ``claim`` / ``claim_queues``, flow.sql ``flow_claim``)
leave out what the claim itself decided for every row they return: status ``running``, the
owner and the token ``nonce:id`` (a replayed row is matched on exactly those). This module
puts them back. It builds the record the way :func:`tether.stores._records.job_of` does,
without the frozen dataclass ``__init__``, but with the slot assignments written out in one
generated function: rebuilding a full tuple for ``job_of`` cost a third more than the
record itself (issue 23).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

from tether.stores._records import JobRecord

#: The claim row's columns, in the order of the statements' select lists.
COLUMNS = ("id", "task", "queue", "payload", "priority", "run_at", "attempt", "max_attempts",
           "failures", "stall_count", "max_stalls", "interruptions", "lease_until",
           "created_at", "started_at", "finished_at", "last_error", "failure_reason", "result",
           "checkpoint", "progress", "unique_key", "cancel_requested", "errors", "uid",
           "limit_key", "snoozes")
#: What the claim decided, filled in here.
DECIDED = ("status", "locked_by", "lease_token")


def _builder() -> Callable[[Sequence[Any], str, str], JobRecord]:
    names = [f.name for f in fields(JobRecord)]
    if sorted(names) != sorted(COLUMNS + DECIDED):  # a field added or renamed: say so here
        raise AssertionError(f"claim row columns do not cover JobRecord: {names}")
    scope: dict[str, Any] = {"new": object.__new__, "JobRecord": JobRecord}
    lines = ["def build(row, owner, token):", "    job = new(JobRecord)"]
    for name in names:
        scope[f"set_{name}"] = getattr(JobRecord, name).__set__
        if name in COLUMNS:
            value = f"row[{COLUMNS.index(name)}]"
        else:
            value = {"status": "'running'", "locked_by": "owner", "lease_token": "token"}[name]
        lines.append(f"    set_{name}(job, {value})")
    lines.append("    return job")
    exec("\n".join(lines), scope)  # the text above: made of JobRecord field names only
    build: Callable[[Sequence[Any], str, str], JobRecord] = scope["build"]
    return build


_build = _builder()


def claimed_job(row: Sequence[Any], owner: str, nonce: str) -> JobRecord:
    """The whole record of a job the claim with ``owner`` and ``nonce`` holds."""
    if len(row) != len(COLUMNS):
        raise ValueError(f"a claim row has {len(COLUMNS)} columns, got {len(row)}")
    return _build(row, owner, f"{nonce}:{row[0]}")


__all__ = ["COLUMNS", "claimed_job"]
