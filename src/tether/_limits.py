"""What a store accepts, checked once, before any store is touched.

Invariant: every store calls :func:`check_jobs` on a whole batch before it writes anything, so
bad input gets one ``ValueError`` naming the field and the limit, *identically on every store*,
and a batch is all or nothing (a bad job never leaves a good one half-written behind it). The
limits are the smallest that any store can hold: PostgreSQL's ``integer`` columns and btree
entries, SQLite's 64-bit integers, Redis key names and the year 9999 that every clock can
represent. docs/guarantees.md lists them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.stores._contract import NewJob

#: Longest task name, queue name and unique key, in characters (an index entry must hold it:
#: 4 bytes a character in UTF-8 stays far below PostgreSQL's ~2.7 kB btree limit).
MAX_NAME = 255
MAX_UNIQUE_KEY = 512
#: Priorities, attempt and stall budgets are PostgreSQL ``integer``s.
MIN_INT32, MAX_INT32 = -(2**31), 2**31 - 1
#: Job ids are 64-bit everywhere.
MAX_JOB_ID = 2**63 - 1
#: The last second every store's clock can represent (9999-12-31T23:59:59Z).
MAX_EPOCH = 253_402_300_799.0
#: A delay may not push a job past that either; 100 years is plenty.
MAX_DELAY = 100 * 365.25 * 86_400.0
#: Largest ``list_jobs`` page.
MAX_PAGE = 10_000
#: Most parents of one job (``NewJob.after``): a chord's callback over a fan-out of 10,000.
MAX_AFTER = 10_000


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_text(value: Any, field: str, *, limit: int, allow_empty: bool = False) -> str:
    """A name-like string: non-empty, at most ``limit`` characters, no NUL, valid UTF-8."""
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}")
    if not value and not allow_empty:
        raise ValueError(f"{field} must be a non-empty string")
    if len(value) > limit:
        raise ValueError(f"{field} is {len(value)} characters long; the limit is {limit}")
    if "\x00" in value:
        raise ValueError(f"{field} must not contain NUL characters")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"{field} contains a lone surrogate (not valid Unicode text); "
                "decode file names with os.fsdecode or errors='replace' first"
            ) from None
    return value


def check_int(value: Any, field: str, *, low: int, high: int) -> int:
    if not _is_int(value):
        raise ValueError(f"{field} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{field} must be between {low} and {high}, got {value}")
    return int(value)


def check_epoch(value: Any, field: str) -> float:
    """Epoch seconds a store can represent: finite, from 1970 to the year 9999."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{field} must be epoch seconds (a number), got {value!r}")
    if not math.isfinite(value) or not 0 <= value <= MAX_EPOCH:
        raise ValueError(
            f"{field} must be finite epoch seconds between 0 and {MAX_EPOCH:.0f} "
            f"(year 9999), got {value!r}"
        )
    return float(value)


def check_delay(value: Any, field: str = "delay") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{field} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or not 0 <= value <= MAX_DELAY:
        raise ValueError(
            f"{field} must be a finite number of seconds from 0 to {MAX_DELAY:.0f} "
            f"(100 years), got {value!r}"
        )
    return float(value)


def check_job_id(value: Any) -> int:
    """A job id as a store knows it: a positive 64-bit integer."""
    return check_int(value, "job id", low=1, high=MAX_JOB_ID)


def check_page(limit: Any) -> int:
    return check_int(limit, "limit", low=1, high=MAX_PAGE)


def check_json_text(text: Any, field: str) -> str:
    """JSON text from the API layer: a str that encodes as UTF-8 (no lone surrogates)."""
    if not isinstance(text, str):
        raise TypeError(f"{field} must be JSON text (str), got {type(text).__name__}")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise TypeError(
                f"{field} contains a lone surrogate, which JSON text cannot carry"
            ) from None
    return text


def check_job(job: NewJob) -> None:
    check_text(job.task, "task name", limit=MAX_NAME)
    check_text(job.queue, "queue", limit=MAX_NAME)
    check_json_text(job.payload, "payload")
    check_int(job.priority, "priority", low=MIN_INT32, high=MAX_INT32)
    check_int(job.max_attempts, "max_attempts", low=1, high=MAX_INT32)
    check_int(job.max_stalls, "max_stalls", low=1, high=MAX_INT32)
    if job.run_at is not None:
        check_epoch(job.run_at, "run_at")
    check_delay(job.delay)
    if job.unique_key is not None:
        check_text(job.unique_key, "unique_key", limit=MAX_UNIQUE_KEY)
    if job.limit_key is not None:
        check_text(job.limit_key, "limit_key", limit=MAX_UNIQUE_KEY, allow_empty=True)
    if not isinstance(job.after, tuple):
        raise TypeError(f"after must be a tuple of job ids, got {type(job.after).__name__}")
    if len(job.after) > MAX_AFTER:
        raise ValueError(f"after lists {len(job.after)} jobs; at most {MAX_AFTER}")
    for parent in job.after:
        check_int(parent, "after: job id", low=1, high=MAX_JOB_ID)
    if not isinstance(job.allow_failure, bool):
        raise ValueError(f"allow_failure must be True or False, got {job.allow_failure!r}")


def same_options(job: NewJob, checked: NewJob) -> bool:
    """Whether every field of ``job`` but its payload and limit key is the very object
    (``is``, never ``==``: ``True == 1``) of a job already checked, so checked already: how
    ``enqueue_many`` builds its jobs (tether._newjob.batch_job)."""
    return (job.task is checked.task and job.queue is checked.queue
            and job.priority is checked.priority and job.run_at is checked.run_at
            and job.delay is checked.delay and job.max_attempts is checked.max_attempts
            and job.max_stalls is checked.max_stalls and job.unique_key is checked.unique_key
            and job.after is checked.after and job.allow_failure is checked.allow_failure)


def check_jobs(jobs: Sequence[NewJob]) -> None:
    """Check a whole batch before any of it is written; the error names the job's position.
    A job whose other fields are those of the job before it (:func:`_same_options`) has only
    its payload and limit key checked: the rest was (issue #23: the checks were a fifth of
    an ``enqueue_many``'s producer time per job)."""
    prev: NewJob | None = None
    for i, job in enumerate(jobs):
        try:
            if prev is not None and same_options(job, prev):
                check_json_text(job.payload, "payload")
                if job.limit_key is not None:
                    check_text(job.limit_key, "limit_key", limit=MAX_UNIQUE_KEY,
                               allow_empty=True)
            else:
                check_job(job)
                prev = job
        except (ValueError, TypeError) as exc:
            if len(jobs) == 1:
                raise
            raise type(exc)(f"job {i} of the batch: {exc}") from None
