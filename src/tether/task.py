"""Tasks: a function plus how its jobs are queued, retried and bounded."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tether import payload
from tether.backoff import Backoff
from tether.errors import ConfigError
from tether.stores.base import NewJob

if TYPE_CHECKING:
    from tether.app import App


@dataclass(frozen=True, slots=True)
class TaskOptions:
    name: str
    queue: str
    max_attempts: int
    max_stalls: int
    timeout: float | None
    retry: Backoff
    priority: int


def check_options(opts: TaskOptions) -> None:
    if not opts.name or not isinstance(opts.name, str):
        raise ConfigError("task name must be a non-empty string")
    if not isinstance(opts.queue, str) or not opts.queue:
        raise ConfigError(f"task {opts.name}: queue must be a non-empty string")
    if not isinstance(opts.max_attempts, int) or opts.max_attempts < 1:
        raise ConfigError(f"task {opts.name}: max_attempts must be an integer >= 1")
    if not isinstance(opts.max_stalls, int) or opts.max_stalls < 1:
        raise ConfigError(f"task {opts.name}: max_stalls must be an integer >= 1")
    if opts.timeout is not None and (
        not isinstance(opts.timeout, int | float) or not math.isfinite(opts.timeout)
        or opts.timeout <= 0
    ):
        raise ConfigError(f"task {opts.name}: timeout must be a positive number of seconds")
    if not isinstance(opts.retry, Backoff):
        raise ConfigError(f"task {opts.name}: retry must be a tether.Backoff")


class Task:
    """A registered function. Call it directly to run it inline; ``enqueue`` to queue it."""

    def __init__(self, app: App, func: Callable[..., Any], options: TaskOptions) -> None:
        check_options(options)
        self.app = app
        self.func = func
        self.options = options
        self.is_async = inspect.iscoroutinefunction(func)
        self.__doc__ = func.__doc__
        self.__name__ = getattr(func, "__name__", options.name)

    @property
    def name(self) -> str:
        return self.options.name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tether.Task {self.name} queue={self.options.queue}>"

    def new_job(
        self,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        *,
        delay: float | None = None,
        run_at: float | datetime | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
        queue: str | None = None,
    ) -> NewJob:
        return make_new_job(
            self.name, args, kwargs, queue=self.options.queue if queue is None else queue,
            priority=self.options.priority if priority is None else priority,
            delay=delay, run_at=run_at, unique_key=unique_key,
            max_attempts=self.options.max_attempts, max_stalls=self.options.max_stalls,
        )

    def enqueue(
        self,
        *args: Any,
        delay: float | None = None,
        run_at: float | datetime | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
        queue: str | None = None,
        conn: Any = None,
        **kwargs: Any,
    ) -> int:
        """Queue one job; returns its id. ``conn``: enqueue inside that database transaction."""
        job = self.new_job(args, kwargs, delay=delay, run_at=run_at, priority=priority,
                           unique_key=unique_key, queue=queue)
        return self.app.enqueue_jobs([job], conn=conn)[0]

    def enqueue_many(
        self, calls: Iterable[tuple[Sequence[Any], dict[str, Any]]], *, conn: Any = None
    ) -> list[int]:
        """Queue many jobs in one store round trip: ``calls`` is ``[(args, kwargs), ...]``."""
        jobs = []
        for call in calls:
            if not (isinstance(call, tuple | list) and len(call) == 2):
                raise TypeError("enqueue_many takes (args, kwargs) pairs")
            args, kwargs = call
            jobs.append(self.new_job(tuple(args), dict(kwargs)))
        return self.app.enqueue_jobs(jobs, conn=conn)


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
) -> NewJob:
    """Validate one job's enqueue options; every refusal names the option."""
    if delay is not None and run_at is not None:
        raise ValueError("give delay or run_at, not both")
    if delay is not None and (
        isinstance(delay, bool) or not isinstance(delay, int | float)
        or not math.isfinite(delay) or delay < 0
    ):
        raise ValueError(f"delay must be a number of seconds >= 0, got {delay!r}")
    when: float | None = None
    if isinstance(run_at, datetime):
        if run_at.tzinfo is None:
            raise ValueError("run_at must be timezone-aware (e.g. datetime.now(timezone.utc))")
        when = run_at.timestamp()
    elif run_at is not None:
        if isinstance(run_at, bool) or not isinstance(run_at, int | float):
            raise ValueError(f"run_at must be a datetime or epoch seconds, got {run_at!r}")
        when = float(run_at)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValueError(f"priority must be an integer, got {priority!r}")
    if unique_key is not None and (not isinstance(unique_key, str) or not unique_key):
        raise ValueError("unique_key must be a non-empty string")
    if not isinstance(queue, str) or not queue:
        raise ValueError("queue must be a non-empty string")
    return NewJob(
        task=task, payload=payload.encode_call(tuple(args), kwargs, task), queue=queue,
        priority=priority, run_at=when, delay=float(delay or 0.0), max_attempts=max_attempts,
        max_stalls=max_stalls, unique_key=unique_key,
    )
