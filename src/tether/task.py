"""Tasks: a function plus how its jobs are queued, retried and bounded."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tether import limits, payload
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
    limits.check_text(queue, "queue", limit=limits.MAX_NAME)
    limits.check_text(task, "task name", limit=limits.MAX_NAME)
    return NewJob(
        task=task, payload=payload.encode_call(tuple(args), kwargs, task), queue=queue,
        priority=priority, run_at=when, delay=float(delay or 0.0), max_attempts=max_attempts,
        max_stalls=max_stalls, unique_key=unique_key,
    )
