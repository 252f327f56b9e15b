"""Waiting for a job's result: ``App.wait`` and ``App.await_result``.

Woken by the store (``Store.wait_for_finish``: LISTEN/NOTIFY on PostgreSQL, pub/sub on Redis,
a short poll on SQLite), never a busy poll. The job is read again after every wake-up, and at
least every :data:`WAKE_EVERY` seconds, because a notification sent between our read and our
subscription is not seen: that race costs latency, never a missed result. Transient store
errors are retried until the timeout: waiting must not fail because the store blinked.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from tether import _clock as clock
from tether._errors import (
    JobFailed,
    JobNotFound,
    JobWasCancelled,
    ResultNotDecodable,
    StoreUnavailable,
)
from tether.stores._contract import Producer
from tether.stores._records import TERMINAL, JobRecord

if TYPE_CHECKING:
    from tether._runtime import Runtime

#: Longest sleep between two reads of the job while waiting (see the module docstring).
WAKE_EVERY = 1.0
#: Pause before reading again after a transient store error.
ERROR_PAUSE = 0.2


def outcome(runtime: Runtime, record: JobRecord, *, imports: bool = True) -> Any:
    """The decoded result of a finished job, or JobFailed / JobWasCancelled /
    ResultNotDecodable. ``imports``: as in ``Runtime.view``."""
    if record.status == "done":
        task = runtime.registry.reading_task(record.task, imports=imports)
        if task is None or record.result is None:
            return runtime.view(record, imports=False).result
        try:  # decoded once, strictly: the view's lenient decode would hide a refusal
            return task.decode_result(json.loads(record.result))
        except Exception as exc:  # a codec's refusal, whatever its class
            raise ResultNotDecodable(runtime.view(record, imports=False),
                                     task.hints.get("return", Any), exc) from exc
    if record.status == "cancelled":
        raise JobWasCancelled(runtime.view(record, imports=imports))
    raise JobFailed(runtime.view(record, imports=imports))


def _check(job_id: int, timeout: float | None) -> float | None:
    if timeout is not None and (isinstance(timeout, bool) or not (
            isinstance(timeout, int | float) and timeout >= 0)):  # True is no number of seconds
        raise ValueError(f"timeout must be a number of seconds >= 0 or None, got {timeout!r}")
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise TypeError(f"job_id must be an int, got {type(job_id).__name__}")
    return None if timeout is None else clock.monotonic() + timeout


def _not_found(job_id: int) -> JobNotFound:
    """JobNotFound saying why a waited-for id may be unknown: the usual reason is a finished
    job whose row the retention pruned, whose result is then gone with it."""
    error = JobNotFound(job_id)
    error.args = (f"{error} (never enqueued, or finished and since pruned by the retention "
                  "settings, or purged)",)
    return error


class _Wait:
    """The decisions of one wait, shared by ``wait`` and ``await_result``: they differ only in
    how they read the job and block, so the rules (when to give up, how long to block, what a
    transient error costs) live here once."""

    def __init__(self, job_id: int, timeout: float | None) -> None:
        self.job_id = job_id
        self.timeout = timeout
        self.deadline = _check(job_id, timeout)
        self.status = "unknown"

    def blocked_for(self, record: JobRecord | None, readable: bool) -> float:
        """After one read (``readable`` False: the store was unavailable): how long to block
        next. Raises JobNotFound, or TimeoutError once the deadline has passed; a terminal
        job is the caller's to report."""
        if not readable:
            self.status, pause = "unknown: the store is unavailable", ERROR_PAUSE
        elif record is None:
            raise _not_found(self.job_id)
        else:
            self.status, pause = record.status, WAKE_EVERY
        left = None if self.deadline is None else self.deadline - clock.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError(f"job {self.job_id} did not finish within {self.timeout}s "
                               f"(it is {self.status})")
        return pause if left is None else min(pause, left)


def wait(runtime: Runtime, job_id: int, timeout: float | None) -> Any:
    state = _Wait(job_id, timeout)
    while True:
        try:  # the store is opened here too: an outage at the start is ridden out as well
            store: Producer = runtime.store
            record, readable = store.get_job(job_id), True
        except StoreUnavailable:
            record, readable = None, False
        if record is not None and record.status in TERMINAL:
            return outcome(runtime, record)
        slice_ = state.blocked_for(record, readable)
        try:
            if not readable:
                raise StoreUnavailable("the store is unavailable")
            store.wait_for_finish([job_id], slice_)
        except StoreUnavailable:
            clock.sleep(min(ERROR_PAUSE, slice_))


async def await_result(runtime: Runtime, job_id: int, timeout: float | None) -> Any:
    state = _Wait(job_id, timeout)
    while True:
        try:  # as in wait(): opening the store is part of what is retried
            producer = await runtime.async_producer()
            record, readable = await producer.get_job(job_id), True
        except StoreUnavailable:
            record, readable = None, False
        if record is not None and record.status in TERMINAL:
            # outcome() decodes by the task: no import on the loop
            await runtime.registry.aimport_includes()
            return outcome(runtime, record, imports=False)
        slice_ = state.blocked_for(record, readable)
        try:
            if not readable:
                raise StoreUnavailable("the store is unavailable")
            await producer.wait_for_finish([job_id], slice_)
        except StoreUnavailable:
            await asyncio.sleep(min(ERROR_PAUSE, slice_))
