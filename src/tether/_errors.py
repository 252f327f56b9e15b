"""Tether's exceptions.

The tree::

    TetherError
    ├── ConfigError            a setting or URL is wrong; the message says what to change
    │   └── AuthError          a tether server refused the token (unknown, or not allowed
    │                          to call that method)
    ├── JobNotFound            no job has that id
    ├── StoreError             the store failed
    │   ├── StoreUnavailable   transient: connection refused/dropped, locked; safe to retry
    │   │   └── StoreFull      the store refuses writes until it has room (Redis at its
    │   │                      maxmemory): a worker stops claiming until it has room again
    │   ├── StoreGone          the store's data is gone under us (SQLite file deleted or
    │   │                      replaced): a worker must stop, not carry on against nothing
    │   └── SchemaError        schema missing, or newer than this tether knows
    ├── LeaseLost              a fenced write was rejected: this worker no longer holds the job
    ├── JobFailed              ``app.wait``: the job was dead-lettered
    │   └── JobWasCancelled    ``app.wait``: the job was cancelled
    ├── ResultNotDecodable     ``app.wait``: done, but the result is not of the annotated type
                               (also a ``TypeError``)
    └── Interrupted            raised inside a handler by ``check_cancelled()``
        ├── JobCancelled       someone asked to cancel the job
        ├── LeaseInterrupted   the lease was lost (reaped, timed out, store unreachable)
        └── ShuttingDown       the worker was told to stop and the grace period ran out

Handlers may raise ``Retry`` (retry after a given delay, counted as a failure), ``Snooze``
(run again after a delay, *not* a failure and not an attempt that counts) or ``Fail``
(dead-letter now, no retry) to steer the outcome; none is an error of tether's.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether._jobview import Job


class TetherError(Exception):
    """Base of every error tether raises."""


class ConfigError(TetherError, ValueError):
    """A setting, option or URL is invalid."""


class AuthError(ConfigError):
    """A tether server refused the caller's token (``code`` ``"unauthenticated"``: unknown or
    missing) or the call for its role (``"permission_denied"``). The message names the token
    by fingerprint only. Not retried: a wrong token stays wrong."""

    def __init__(self, message: str, *, code: str = "unauthenticated") -> None:
        super().__init__(message)
        self.code = code


class JobNotFound(TetherError, LookupError):
    def __init__(self, job_id: int) -> None:
        super().__init__(f"no job with id {job_id}")
        self.job_id = job_id


class StoreError(TetherError):
    """The store failed."""


class StoreUnavailable(StoreError):
    """Transient trouble reaching the store; callers may retry with backoff."""


class StoreFull(StoreUnavailable):
    """The store refused the call, whole, because it is full (Redis at ``maxmemory`` under
    ``noeviction``): nothing was written. Transient, so a caller may retry; but a worker stops
    *claiming* while it sees this: a job claimed now could be neither renewed nor finished,
    and would only wedge the queue until an operator frees memory."""


class StoreGone(StoreError):
    """The data this process was working on is gone (e.g. the SQLite file was deleted or
    replaced under it). Retrying cannot help and carrying on would run jobs nobody sees."""


class SchemaError(StoreError):
    """The schema is missing or of a version this code does not know."""


class LeaseLost(TetherError):
    """A fenced write was rejected because this worker no longer holds the job's lease."""

    def __init__(self, job_id: int, attempt: int, what: str = "write") -> None:
        super().__init__(
            f"{what} rejected: job {job_id} attempt {attempt} is no longer held by this worker"
        )
        self.job_id = job_id
        self.attempt = attempt


class JobFailed(TetherError):
    """The job waited for did not succeed: it was dead-lettered (``failed``).

    ``job`` is its view as read when the wait ended; ``reason`` its ``failure_reason``
    (``error``, ``timeout``, ``stalled``, ``bad_arguments``...) and ``last_error`` the error
    text of its last attempt.
    """

    def __init__(self, job: Job) -> None:
        self.job = job
        self.job_id = job.id
        self.reason = job.failure_reason
        self.last_error = job.last_error
        super().__init__(self._message())

    def _message(self) -> str:
        last = (self.last_error or "").strip().splitlines()
        back = (f" and {self.job.interruptions} hand-back(s)" if self.job.interruptions
                else "")
        return (f"job {self.job.id} ({self.job.task}) failed after {self.job.tries} "
                f"attempt(s){back}, reason {self.reason}: "
                f"{last[0] if last else 'no error recorded'}")

    def __reduce__(self) -> tuple[type, tuple[Job]]:
        return (type(self), (self.job,))


class JobWasCancelled(JobFailed):
    """The job waited for was cancelled (``App.cancel``) before it could finish."""

    def _message(self) -> str:
        return f"job {self.job.id} ({self.job.task}) was cancelled"


class ResultNotDecodable(TetherError, TypeError):
    """The job is done, but its stored result does not decode as its task's return annotation
    says (the handler returned something else, or the annotation changed since). ``wait``
    promises a value of that type, so handing back the raw JSON would be a silent lie; ``job``
    is the view (whose ``result`` is the plain JSON) and ``__cause__`` the codec's refusal."""

    def __init__(self, job: Job, type_: Any, cause: BaseException) -> None:
        self.job = job
        self.job_id = job.id
        name = getattr(type_, "__name__", None) or repr(type_)
        super().__init__(f"job {job.id} ({job.task}) is done, but its result {job.result!r:.200}"
                         f" does not decode as {name}: {type(cause).__name__}: {cause}")


class Interrupted(TetherError):
    """The running handler must stop; raised by ``current_job().check_cancelled()``."""


class JobCancelled(Interrupted):
    """Cancellation was requested with ``App.cancel``."""


class LeaseInterrupted(Interrupted):
    """The worker lost the job's lease; whatever the handler does next will be rejected."""


class ShuttingDown(Interrupted):
    """The worker is stopping and the drain period is over; the lease is handed back."""


class Retry(Exception):
    """Raise from a handler to retry after ``delay`` seconds (counts as a failure)."""

    def __init__(self, reason: str = "retry requested", *, delay: float | None = None) -> None:
        super().__init__(reason)
        self.delay = delay


class Snooze(Exception):
    """Raise from a handler to put its job back for ``seconds`` without using an attempt:
    the job is ``pending`` again, due in ``seconds``, with ``snoozes + 1``; ``failures`` and
    the attempt budget are untouched, and the job's history records the snooze. For "the
    downstream API says try again in 30 s", which is not the job's failure.

    ``seconds``: a positive number or a ``datetime.timedelta``; ``reason``: shown in the
    history next to the delay."""

    def __init__(self, seconds: float | timedelta, reason: str | None = None) -> None:
        if isinstance(seconds, timedelta):
            seconds = seconds.total_seconds()
        if (isinstance(seconds, bool) or not isinstance(seconds, int | float)
                or not math.isfinite(seconds) or seconds <= 0):
            raise ValueError(f"Snooze takes a positive number of seconds, got {seconds!r}")
        if seconds > MAX_SNOOZE:
            raise ValueError(f"Snooze of {seconds:g} s is longer than the limit "
                             f"({MAX_SNOOZE:g} s, one year)")
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"Snooze reason must be a str, got {type(reason).__name__}")
        self.seconds = float(seconds)
        self.reason = reason
        super().__init__(self.describe())

    def describe(self) -> str:
        """The text the job's history shows: ``snoozed for 30 s: rate limited``."""
        text = f"snoozed for {self.seconds:g} s"
        return text if not self.reason else f"{text}: {self.reason}"

    def __reduce__(self) -> tuple[type, tuple[float, str | None]]:
        return (type(self), (self.seconds, self.reason))


#: The longest snooze: a year, like the longest delay an enqueue takes.
MAX_SNOOZE = 366 * 86400.0


class Fail(Exception):
    """Raise from a handler to dead-letter the job now, without further attempts."""
