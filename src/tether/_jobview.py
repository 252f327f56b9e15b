"""``tether.Job``: the public view of one job, in Python values.

The store record (:class:`tether.stores.JobRecord`) carries JSON text and epoch floats, and
never leaves the store seam except through the operations layer (CLI, dashboard, metrics use
the store contract directly). What ``App.get_job`` hands users is this view: arguments, result,
checkpoint, progress and error history decoded by the app's codec (arguments and result by the
task's annotations when the app knows the task), and every time a timezone-aware UTC datetime.
It is a snapshot: reading it never touches the store.

This module holds the value only and imports nothing of tether but the store's literal
types, so that every module, :mod:`tether._errors` included, may name ``tether.Job``
without an import circle; :mod:`tether._jobread` builds it from a record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tether.stores._records import JobStatus

__all__ = ["Job"]


@dataclass(frozen=True, slots=True)
class Job:
    """One job as of the moment it was read.

    ``attempt`` counts claims (``(id, attempt, uid)`` is the dedup key of an attempt); ``failures``
    counts handler errors and timeouts, ``stall_count`` lost leases, ``interruptions`` leases
    handed back (on shutdown, or jobs a process-pool child released without running), and
    ``snoozes`` the times its handler put it back for later (``tether.Snooze``): those are not
    attempts, and ``tries`` (``attempt - interruptions - snoozes``) is the attempt number.
    ``errors`` holds one ``{"attempt", "error", "reason", "at", "owner"}`` record per attempt
    that did not succeed or snoozed, oldest first (``at`` a datetime).
    """

    id: int
    task: str
    queue: str
    status: JobStatus
    priority: int
    args: list[Any]
    kwargs: dict[str, Any]
    result: Any
    checkpoint: Any
    progress: Any
    attempt: int
    max_attempts: int
    failures: int
    stall_count: int
    max_stalls: int
    interruptions: int
    failure_reason: str | None
    last_error: str | None
    unique_key: str | None
    cancel_requested: bool
    locked_by: str | None
    run_at: datetime
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    lease_until: datetime | None
    errors: list[dict[str, Any]] = field(default_factory=list)
    #: 128 random bits (32 hex digits) drawn at enqueue, never reused: ``id`` comes from a
    #: counter that a store can hand out again after losing rows (docs/guarantees.md).
    uid: str = ""
    #: The value its task's flow limits count it under (``limit_key=``), or None.
    limit_key: str | None = None
    #: Times its handler snoozed it (``tether.Snooze``): neither failures nor tries.
    snoozes: int = 0

    @property
    def tries(self) -> int:
        """Attempts that count: claims (``attempt``) less hand-backs (``interruptions``: jobs
        released without running, or handed back on shutdown) and snoozes, so ``tries``
        never exceeds ``max_attempts`` the way ``attempt`` may."""
        return max(0, self.attempt - self.interruptions - self.snoozes)

    @property
    def handed_back(self) -> int:
        """The same as :attr:`interruptions`: claims that ended handed back, which are not
        attempts."""
        return self.interruptions

    @property
    def finished(self) -> bool:
        """Done, failed (dead-lettered) or cancelled: nothing will change it any more
        (short of a dead-letter retry)."""
        return self.status in ("done", "failed", "cancelled")

    # Names of the store record's decoded helpers, for code written before the view.
    @property
    def result_value(self) -> Any:
        """The same as :attr:`result`."""
        return self.result

    @property
    def error_history(self) -> list[dict[str, Any]]:
        """The same as :attr:`errors`."""
        return self.errors
