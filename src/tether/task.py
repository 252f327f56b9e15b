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


#: The keyword arguments ``Task.enqueue`` takes as enqueue options, not task arguments.
OPTIONS = frozenset({"delay", "run_at", "priority", "unique_key", "queue", "conn"})


class BadArguments(TypeError):
    """A job's stored arguments do not fit its task's function (not [args, kwargs], or they do
    not bind to its signature). Running the handler again cannot fix that, so the job is
    dead-lettered at once with reason ``bad_arguments``."""


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
        try:
            self._signature: inspect.Signature | None = inspect.signature(func)
        except (TypeError, ValueError):  # some builtins have none: the call itself will tell
            self._signature = None
        named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        params = self._signature.parameters.values() if self._signature else ()
        #: The function's parameters that a keyword can name.
        self.params = frozenset(p.name for p in params if p.kind in named)
        #: Enqueue options that are also parameter names of the function: ambiguous keywords.
        self.shadowed = OPTIONS & self.params

    @property
    def name(self) -> str:
        return self.options.name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tether.Task {self.name} queue={self.options.queue}>"

    def arguments(self, payload_text: str) -> tuple[list[Any], dict[str, Any]]:
        """Decode a job's payload and check that it binds to the function's signature."""
        try:
            args, kwargs = payload.decode_call(payload_text)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            raise BadArguments(f"the stored arguments of {self.name} are not "
                               f"[args, kwargs] JSON: {exc}") from None
        if self._signature is not None:
            try:
                self._signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise BadArguments(f"the stored arguments do not fit {self.name}: {exc}") \
                    from None
        return args, kwargs

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

    def enqueue(self, *args: Any, **kwargs: Any) -> int:
        """Queue one job; returns its id.

        Keywords named ``delay``, ``run_at``, ``priority``, ``unique_key``, ``queue`` and
        ``conn`` are enqueue options (``conn``: enqueue inside that database transaction);
        every other keyword is an argument of the task. When the function itself has a
        parameter with one of those names, the keyword is ambiguous and TypeError is raised
        rather than silently taking it as the option: use :meth:`enqueue_with`, which keeps
        the task's arguments apart from the options.
        """
        options = {k: kwargs.pop(k) for k in OPTIONS & kwargs.keys()}
        clash = sorted(self.shadowed & options.keys())
        if clash:
            names = ", ".join(clash)
            raise TypeError(
                f"{self.name} has a parameter named {names}, which is also an enqueue option: "
                f"pass the task's arguments with {self.__name__}.enqueue_with(args=(...), "
                f"kwargs={{{clash[0]!r}: ...}}) and options as keywords of enqueue_with"
            )
        return self.enqueue_with(args, kwargs, **options)

    def enqueue_with(
        self,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        *,
        delay: float | None = None,
        run_at: float | datetime | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
        queue: str | None = None,
        conn: Any = None,
    ) -> int:
        """Queue one job with the task's arguments given apart from the options, so any
        argument name works (``kwargs={"delay": 5}`` is the task's ``delay``)."""
        job = self.new_job(tuple(args), dict(kwargs or {}), delay=delay, run_at=run_at,
                           priority=priority, unique_key=unique_key, queue=queue)
        return self.app.enqueue_jobs([job], conn=conn)[0]

    def enqueue_many(
        self,
        calls: Iterable[tuple[Sequence[Any], dict[str, Any]]],
        *,
        delay: float | None = None,
        run_at: float | datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        conn: Any = None,
    ) -> list[int]:
        """Queue many jobs in one store round trip: ``calls`` is ``[(args, kwargs), ...]``;
        the options (as in :meth:`enqueue_with`) apply to every job of the batch."""
        jobs = []
        for call in calls:
            if not (isinstance(call, tuple | list) and len(call) == 2):
                raise TypeError("enqueue_many takes (args, kwargs) pairs")
            args, kwargs = call
            jobs.append(self.new_job(tuple(args), dict(kwargs), delay=delay, run_at=run_at,
                                     priority=priority, queue=queue))
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
