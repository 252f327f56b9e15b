"""A claimed job's :class:`JobRecord` from the claim statements' short row.

The claim statements (queries.sql ``claim`` / ``claim_queues``, flow.sql ``flow_claim``)
leave out what the claim itself decided for every row they return: status ``running``, the
owner and the token ``nonce:id`` (a replayed row is matched on exactly those). This module
puts them back. It builds the record the way :func:`tether.stores._records.job_of` does,
without the frozen dataclass ``__init__`` (``slot_builder``), straight from the row:
rebuilding a full tuple for ``job_of`` cost a third more than the record itself (issue 23).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tether.stores._records import JobRecord, slot_builder

#: The claim row's columns, in the order of the statements' select lists.
COLUMNS = ("id", "task", "queue", "payload", "priority", "run_at", "attempt", "max_attempts",
           "failures", "stall_count", "max_stalls", "interruptions", "lease_until",
           "created_at", "started_at", "finished_at", "last_error", "failure_reason", "result",
           "checkpoint", "progress", "unique_key", "cancel_requested", "errors", "uid",
           "limit_key", "snoozes")

#: One record from a claim row (slot_builder: no frozen dataclass __init__).
_build: Callable[[Sequence[Any], str, str], JobRecord] = slot_builder(
    JobRecord, "build", "row, owner, token",
    {**{name: f"row[{i}]" for i, name in enumerate(COLUMNS)},
     "status": "'running'", "locked_by": "owner", "lease_token": "token"})


def claimed_job(row: Sequence[Any], owner: str, nonce: str) -> JobRecord:
    """The whole record of a job the claim with ``owner`` and ``nonce`` holds."""
    if len(row) != len(COLUMNS):
        raise ValueError(f"a claim row has {len(COLUMNS)} columns, got {len(row)}")
    return _build(row, owner, f"{nonce}:{row[0]}")


__all__ = ["COLUMNS", "claimed_job"]
