"""Building a job to enqueue: the task's settings, the enqueue options, and their checks.

Every refusal happens here, before the store sees anything, and names the option and its
limit, so bad input is one clear error at enqueue and nothing is written.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
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
                     "limit_key", "after", "allow_failure"})
#: How a workflow step receives its parents' results (the payload envelope's ``pipe``):
#: ``one``, the first parent's result, ``all``, the list of every parent's result (in
#: ``after`` order), prepended to the positional arguments by the worker.
PIPES = frozenset({"one", "all"})
#: What ``after=`` takes: a job id, or an iterable of them (``JobId`` is an int).
After = int | Iterable[int] | None


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


def encode_call(codec: Codec, args: Sequence[Any], kwargs: dict[str, Any], task: str,
                pipe: str | None = None) -> str:
    """``[args, kwargs]`` as JSON text through ``codec`` (``[args, kwargs, {"pipe": ...}]``
    for a workflow step fed its parents' results); one TypeError for what it refuses."""
    if not all(isinstance(k, str) for k in kwargs):
        raise TypeError(f"keyword argument names of {task} must be strings")
    call: list[Any] = [list(args), kwargs]
    if pipe is not None:
        call.append({"pipe": pipe})
    return to_text(codec, call, f"arguments of {task}")


def parent_ids(after: After) -> tuple[int, ...]:
    """``after=`` as the store takes it: a tuple of ids, in the order given, each once (the
    order is that of ``parent_results``). A lone id is a list of one. Refuses what is not an
    id here, naming it, rather than as a store error."""
    if after is None:
        return ()
    items: Iterable[Any] = (after,) if isinstance(after, int) else after
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        raise TypeError(f"after must be a job id or a list of job ids, got {after!r}")
    out: dict[int, None] = {}
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int):
            raise TypeError(f"after must list job ids (int), got {item!r}")
        limits.check_int(item, "after: job id", low=1, high=limits.MAX_JOB_ID)
        out[int(item)] = None
    if len(out) > limits.MAX_AFTER:
        raise ValueError(f"after lists {len(out)} jobs; at most {limits.MAX_AFTER}")
    return tuple(out)


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
    after: After = None,
    allow_failure: bool = False,
    pipe: str | None = None,
) -> NewJob:
    """Validate one job's enqueue options; every refusal names the option and its limit.

    ``after``: the jobs this one waits for (issue #20); ``pipe``: how the worker feeds it
    their results (:data:`PIPES`)."""
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
    parents = parent_ids(after)
    if not isinstance(allow_failure, bool):
        raise TypeError(f"allow_failure must be True or False, got {allow_failure!r}")
    if pipe is not None and pipe not in PIPES:
        raise ValueError(f"pipe must be one of {sorted(PIPES)}, got {pipe!r}")
    return NewJob(
        task=task, payload=encode_call(codec, args, kwargs, task, pipe), queue=queue,
        priority=priority, run_at=when, delay=float(delay or 0.0), max_attempts=max_attempts,
        max_stalls=max_stalls, unique_key=unique_key, limit_key=limit_key, after=parents,
        allow_failure=allow_failure,
    )


def check_limit_key(limit_key: str) -> None:
    """A limit key read from a call's arguments, checked as :func:`make_new_job` checks it."""
    limits.check_text(limit_key, "limit_key", limit=limits.MAX_UNIQUE_KEY, allow_empty=True)


def batch_job(first: NewJob, payload: str, limit_key: str | None) -> NewJob:
    """A later job of an ``enqueue_many`` batch: ``first`` (made and checked by
    :func:`make_new_job` with the batch's options, which every job shares) with this call's
    ``payload`` (from :func:`encode_call`) and ``limit_key`` (the task's ``limit_key=``
    argument in this call, checked by :func:`check_limit_key`), the one option that differs
    per call. Positional: a frozen dataclass's keyword ``__init__`` costs twice as much."""
    return NewJob(first.task, payload, first.queue, first.priority, first.run_at, first.delay,
                  first.max_attempts, first.max_stalls, first.unique_key, limit_key,
                  first.after, first.allow_failure)


def batch_payloads(codec: Codec, task: str) -> Callable[[Sequence[Any], dict[str, Any]], str]:
    """:func:`encode_call` for the later calls of an ``enqueue_many`` batch (the same text and
    refusals; the default codec keeps one C encoder for every call, ``JSONCodec.dumps``)."""

    def payload(args: Sequence[Any], kwargs: dict[str, Any]) -> str:
        return encode_call(codec, args, kwargs, task)

    return payload
