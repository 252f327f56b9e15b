"""Building a job to enqueue: the task's settings, the enqueue options, and their checks.

Every refusal happens here, before the store sees anything, and names the option and its
limit, so bad input is one clear error at enqueue and nothing is written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tether import _limits as limits
from tether._backoff import Backoff
from tether._codec import DEFAULT_CODEC, Codec, to_text
from tether._errors import ConfigError
from tether._flow import key_of
from tether.stores._contract import FlowLimit, NewJob

#: The keyword arguments ``Task.enqueue`` takes as enqueue options, not task arguments.
OPTIONS = frozenset({"delay", "run_at", "priority", "unique_key", "queue", "conn",
                     "limit_key"})


@dataclass(frozen=True, slots=True)
class TaskOptions:
    name: str
    queue: str
    max_attempts: int
    max_stalls: int
    timeout: float | None
    retry: Backoff
    priority: int
    #: The task's fleet-wide limit (``concurrency=``, ``rate=``, ``limit_key=``), or None.
    flow: FlowLimit | None = None
    #: The parameter whose value partitions ``flow`` (``limit_key=``), or None.
    limit_key: str | None = None


def check_options(opts: TaskOptions) -> None:
    """Refuse at registration what enqueue would refuse later: one ConfigError naming it."""
    try:
        limits.check_text(opts.name, "task name", limit=limits.MAX_NAME)
        limits.check_text(opts.queue, f"task {opts.name}: queue", limit=limits.MAX_NAME)
        limits.check_int(opts.max_attempts, f"task {opts.name}: max_attempts", low=1,
                         high=limits.MAX_INT32)
        limits.check_int(opts.max_stalls, f"task {opts.name}: max_stalls", low=1,
                         high=limits.MAX_INT32)
        limits.check_int(opts.priority, f"task {opts.name}: priority", low=limits.MIN_INT32,
                         high=limits.MAX_INT32)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if opts.timeout is not None and (
        not isinstance(opts.timeout, int | float) or not math.isfinite(opts.timeout)
        or opts.timeout <= 0
    ):
        raise ConfigError(f"task {opts.name}: timeout must be a positive number of seconds")
    if not isinstance(opts.retry, Backoff):
        raise ConfigError(f"task {opts.name}: retry must be a tether.Backoff")


def encode_call(codec: Codec, args: Sequence[Any], kwargs: dict[str, Any], task: str) -> str:
    """``[args, kwargs]`` as JSON text through ``codec``; one TypeError for what it refuses."""
    if not all(isinstance(k, str) for k in kwargs):
        raise TypeError(f"keyword argument names of {task} must be strings")
    return to_text(codec, [list(args), kwargs], f"arguments of {task}")


def make_new_job(
    task: str,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    *,
    queue: str = "default",
    priority: int = 0,
    delay: float | None = None,
    run_at: float | datetime | None = None,
    unique_key: str | None = None,
    max_attempts: int = 5,
    max_stalls: int = 3,
    codec: Codec = DEFAULT_CODEC,
    limit_key: str | int | None = None,
) -> NewJob:
    """Validate one job's enqueue options; every refusal names the option and its limit."""
    if delay is not None and run_at is not None:
        raise ValueError("give delay or run_at, not both")
    if delay is not None:
        limits.check_delay(delay)
    when: float | None = None
    if isinstance(run_at, datetime):
        if run_at.tzinfo is None:
            raise ValueError("run_at must be timezone-aware (e.g. datetime.now(timezone.utc))")
        when = limits.check_epoch(run_at.timestamp(), "run_at")
    elif run_at is not None:
        when = limits.check_epoch(run_at, "run_at")
    limits.check_int(priority, "priority", low=limits.MIN_INT32, high=limits.MAX_INT32)
    if unique_key is not None:
        limits.check_text(unique_key, "unique_key", limit=limits.MAX_UNIQUE_KEY)
    if limit_key is not None:
        limit_key = key_of(limit_key, task, "limit_key")
        limits.check_text(limit_key, "limit_key", limit=limits.MAX_UNIQUE_KEY, allow_empty=True)
    limits.check_text(queue, "queue", limit=limits.MAX_NAME)
    limits.check_text(task, "task name", limit=limits.MAX_NAME)
    return NewJob(
        task=task, payload=encode_call(codec, args, kwargs, task), queue=queue,
        priority=priority, run_at=when, delay=float(delay or 0.0), max_attempts=max_attempts,
        max_stalls=max_stalls, unique_key=unique_key, limit_key=limit_key,
    )
