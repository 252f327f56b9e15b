"""``App``: the entry point users hold. Tasks, enqueueing, inspection, results, a worker.

The App is the user's API only. What the worker, results, logs, the process-pool child, the
CLI and the integrations need (settings, codec, events, the store, the task registry and the
enqueue seam) is its :class:`~tether._runtime.Runtime`, ``app.runtime``. Import order (no
cycle, type-checking imports included): ``app`` imports the runtime, ``task`` and the worker;
none of them imports ``app`` (tests/test_imports.py).
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any, ParamSpec, TypeVar, overload

from tether import _results as results
from tether._backoff import Backoff
from tether._codec import Codec
from tether._config import Settings, make_settings
from tether._errors import ConfigError, JobNotFound
from tether._events import Callback
from tether._flow import task_limit
from tether._jobid import JobId
from tether._jobview import Job
from tether._newjob import OPTIONS, TaskOptions, make_new_job
from tether._periodic import declare
from tether._runtime import Runtime
from tether._task import Task, TaskDecorator
from tether._worker.worker import Worker
from tether.stores._contract import CancelResult, FlowLimit, NewJob, RetryResult, Store

log = logging.getLogger("tether.producer")

P = ParamSpec("P")
R = TypeVar("R")
TaskT = TypeVar("TaskT", bound=Task[Any, Any])  # @app.periodic hands the task back, typed

#: Options ``App.enqueue`` takes beyond ``Task.enqueue``'s: the job's budgets.
BUDGETS = frozenset({"max_attempts", "max_stalls"})


class App:
    """A tether application: one store, a registry of tasks, settings and event callbacks.

    ``url`` defaults to ``$TETHER_URL``, else an SQLite file ``./tether.db``. ``codec``
    carries arguments and results (default :class:`tether._codec.JSONCodec`). ``include``
    names modules that declare tasks, imported when a worker starts (and when a task name is
    looked up and unknown). Options are the fields of :class:`tether._config.Settings`
    (``lease_ttl``, ``heartbeat_interval``, ...); a wrong or unknown option raises
    ConfigError at once. ``auto_migrate``: ``None`` (default) creates a missing schema and
    refuses an older one ("run `tether migrate`"), so a new release's worker never changes the
    schema under the old release's (docs/upgrading.md); ``True`` also upgrades; ``False``
    only checks.
    """

    def __init__(self, url: str | None = None, *, auto_migrate: bool | None = None,
                 codec: Codec | None = None, include: Iterable[str] = (),
                 **options: Any) -> None:
        #: What the worker, the CLI, the testing helpers and the integrations use.
        self.runtime = Runtime(url, make_settings(**options), auto_migrate=auto_migrate,
                               codec=codec, include=include)
        self._unknown_warned: set[str] = set()  # task names enqueue warned about (once each)

    # -- what the app was made with ----------------------------------------------------------
    @property
    def url(self) -> str:
        """The store URL. Setting a new one closes the store opened on the old one, so the
        app never keeps reading and writing where its URL no longer points."""
        return self.runtime.url

    @url.setter
    def url(self, url: str) -> None:
        self.runtime.url = url

    @property
    def settings(self) -> Settings:
        """The checked settings (``lease_ttl``, ``heartbeat_interval``, ...)."""
        return self.runtime.settings

    @property
    def tasks(self) -> Mapping[str, Task[Any, Any]]:
        """The declared tasks by name (read-only)."""
        return MappingProxyType(self.runtime.registry.tasks)

    # -- store -------------------------------------------------------------------------------
    @property
    def store(self) -> Store:
        """The store, opened on first use: a missing schema is created, an older one refused
        with "run `tether migrate`" (``auto_migrate=True`` upgrades it; ``False`` only
        checks). Upgrading is a deploy step, never a side effect of a worker starting."""
        return self.runtime.store

    def close(self) -> None:
        self.runtime.close()

    async def aclose(self) -> None:
        """``close`` for event loops (e.g. a FastAPI lifespan's end): the async producer is
        closed on the loop (its connections belong to it), then the store on a thread."""
        await self.runtime.aclose()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tasks -------------------------------------------------------------------------------
    @overload
    def task(self, func: Callable[P, Coroutine[Any, Any, R]], /) -> Task[P, R]: ...

    @overload
    def task(self, func: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self, func: None = None, /, *, name: str | None = None, queue: str = "default",
        max_attempts: int = 5, max_stalls: int = 3, timeout: float | None = None,
        retry: Backoff | None = None, priority: int = 0, concurrency: int | None = None,
        rate: str | None = None, limit_key: str | None = None,
    ) -> TaskDecorator: ...

    def task(
        self, func: Callable[..., Any] | None = None, /, *, name: str | None = None,
        queue: str = "default", max_attempts: int = 5, max_stalls: int = 3,
        timeout: float | None = None, retry: Backoff | None = None, priority: int = 0,
        concurrency: int | None = None, rate: str | None = None, limit_key: str | None = None,
    ) -> Task[Any, Any] | TaskDecorator:
        """Register a function (plain or ``async def``) as a task; usable bare or with options.

        Flow control (docs/flow-control.md), enforced by the store at claim for the whole
        fleet: ``concurrency``: at most this many of its jobs running at once; ``rate``: at
        most N starts per window (``"100/m"``, ``"5/s"``, ``"1000/h"``); ``limit_key``: the
        name of a parameter whose value partitions both (at most ``concurrency`` per
        customer, say), and by which claims rotate fairly."""

        def register(f: Callable[..., Any]) -> Task[Any, Any]:
            task_name = f"{f.__module__}.{f.__qualname__}" if name is None else name
            registry = self.runtime.registry
            if task_name in registry.tasks:
                raise ConfigError(f"a task named {task_name!r} is already registered")
            flow = task_limit(task_name, f, concurrency=concurrency, rate=rate,
                              limit_key=limit_key)
            task: Task[Any, Any] = Task(self.runtime, f, TaskOptions(
                task_name, queue, max_attempts, max_stalls, timeout, retry or Backoff(),
                priority, flow, limit_key))
            registry.add_task(task)
            return task

        return register(func) if func is not None else register

    def queue(self, name: str, *, concurrency: int | None = None,
              rate: str | None = None) -> FlowLimit:
        """Declare fleet-wide limits of queue ``name``: at most ``concurrency`` of its jobs
        running at once across every worker, at most ``rate`` starts per window
        (``"100/m"``). Every worker of this app enforces them at claim; ``tether stats`` and
        the dashboard show them. Declaring the same limits again is allowed; others are a
        ConfigError."""
        return self.runtime.registry.queue_limits.declare(name, concurrency=concurrency,
                                                          rate=rate)

    def import_includes(self) -> None:
        """Import the modules of ``include`` (once; a failed import is tried again next
        time). An error names the module."""
        self.runtime.registry.import_includes()

    async def aimport_includes(self) -> None:
        """:meth:`import_includes` on a thread, so the caller's event loop never waits on an
        import; a broken include is left to the reads (plain JSON) and the worker."""
        await self.runtime.registry.aimport_includes()

    def find_task(self, name: str) -> Task[Any, Any] | None:
        """The task registered as ``name``; the ``include`` modules are imported first when
        it is not known yet. None when no module declares it."""
        return self.runtime.registry.find_task(name)

    def on(self, event: str, callback: Callback) -> Callback:
        """Subscribe a plain callback to an event (see tether._events.EVENTS)."""
        return self.runtime.events.on(event, callback)

    def periodic(self, *, every: float | None = None, cron: str | None = None,
                 tz: str | None = None, args: Sequence[Any] = (),
                 kwargs: dict[str, Any] | None = None, catch_up: str = "latest",
                 name: str | None = None) -> Callable[[TaskT], TaskT]:
        """Run a task on a schedule (``every=`` seconds or ``cron=``), stacked above
        ``@app.task``; the maintenance leader enqueues one job per tick. See
        docs/periodic.md (tether._periodic)."""
        return declare(self.runtime.registry, every=every, cron=cron, tz=tz, args=args,
                       kwargs=kwargs, catch_up=catch_up, name=name)

    # -- producing ---------------------------------------------------------------------------
    def enqueue_jobs(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[int]:
        """Insert jobs in one round trip; ``conn`` puts them in the caller's transaction.
        A transient store failure is retried briefly with one request id, so a lost reply
        never inserts the jobs twice (:meth:`tether._runtime.Runtime.enqueue_jobs`)."""
        return self.runtime.enqueue_jobs(jobs, conn=conn)

    async def aenqueue_jobs(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[int]:
        """:meth:`enqueue_jobs` for event loops, through the store's async producer."""
        return await self.runtime.aenqueue_jobs(jobs, conn=conn)

    def enqueue(self, task: str, *args: Any, kwargs: dict[str, Any] | None = None,
                **keywords: Any) -> JobId[Any]:
        """Enqueue by task name (for producers that do not import the task's code).

        ``kwargs`` carries the task's keyword arguments, whatever their names. Other keywords
        are enqueue options (``delay``, ``run_at``, ``priority``, ``unique_key``, ``queue``,
        ``conn``, ``limit_key``, ``after``, ``allow_failure``, and ``max_attempts`` /
        ``max_stalls``, which override the task's) or, for any other name, task arguments;
        a keyword that names both an option and a parameter of a task this app knows raises
        TypeError (see ``Task.enqueue``).
        """
        names = OPTIONS | BUDGETS
        options = {k: keywords.pop(k) for k in names & keywords.keys()}
        both = sorted(keywords.keys() & (kwargs or {}).keys())
        if both:
            raise TypeError(f"{', '.join(both)} given both as a keyword and in kwargs=")
        merged = {**(kwargs or {}), **keywords}
        conn = options.pop("conn", None)
        runtime = self.runtime
        known = runtime.registry.find_task(task)
        if known is None:
            self._warn_unknown(task)
            job = make_new_job(task, args, merged, codec=runtime.codec, **options)
            return JobId(runtime.enqueue_jobs([job], conn=conn)[0])
        clash = sorted(known.params & (options.keys() | ({"conn"} if conn is not None else set())))
        if clash:
            raise TypeError(
                f"{task} has a parameter named {', '.join(clash)}, which is also an enqueue "
                "option: pass the task's arguments as kwargs={...} and the option as a "
                "keyword, or use the task's enqueue_with"
            )
        budgets = {k: options.pop(k) for k in BUDGETS & options.keys()}
        new = known.new_job(args, merged, **options)
        if budgets:
            new = replace(new, **budgets)
        return JobId(runtime.enqueue_jobs([new], conn=conn)[0])

    def _warn_unknown(self, task: str) -> None:
        """Warn once per name when an app that registers tasks enqueues one it does not know:
        most often a typo, which would otherwise surface only as an ``unknown_task`` dead
        letter later. A producer with no tasks of its own enqueues by name on purpose and is
        left alone; so is a name another service's workers may well register (hence a
        warning, not an error)."""
        registry = self.runtime.registry
        if not registry.tasks or task in self._unknown_warned:
            return
        self._unknown_warned.add(task)
        near = difflib.get_close_matches(task, list(registry.tasks), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        log.warning("enqueue of task %r, which this app does not register%s: only a worker "
                    "that registers it will run the job", task, hint)

    # -- inspecting and steering -------------------------------------------------------------
    def get_job(self, job_id: int) -> Job:
        """The job as it is now (:class:`tether.Job`); JobNotFound for an unknown id."""
        record = self.runtime.store.get_job(job_id)
        if record is None:
            raise JobNotFound(job_id)
        return self.runtime.view(record)

    async def aget_job(self, job_id: int) -> Job:
        """:meth:`get_job` for event loops."""
        runtime = self.runtime
        record = await (await runtime.async_producer()).get_job(job_id)
        if record is None:
            raise JobNotFound(job_id)
        await runtime.registry.aimport_includes()
        return runtime.view(record, imports=False)

    def cancel(self, job_id: int) -> CancelResult:
        """Pending: cancelled now. Running: its handler is told at the next heartbeat."""
        return self.runtime.store.cancel(job_id)

    async def acancel(self, job_id: int) -> CancelResult:
        """:meth:`cancel` for event loops."""
        return await (await self.runtime.async_producer()).cancel(job_id)

    def retry_failed(self, job_ids: Sequence[int] | None = None) -> RetryResult:
        """Dead-letter retry; jobs whose unique_key a live job holds stay failed and are
        listed in ``conflicts``."""
        return self.runtime.store.retry_failed(job_ids)

    # -- results -----------------------------------------------------------------------------
    @overload
    def wait(self, job_id: JobId[R], timeout: float | None = None) -> R: ...

    @overload
    def wait(self, job_id: int, timeout: float | None = None) -> Any: ...

    def wait(self, job_id: int, timeout: float | None = None) -> Any:
        """Block until the job finishes and return its result, decoded by the task's return
        annotation. Raises :class:`~tether._errors.JobFailed` (dead-lettered),
        :class:`~tether._errors.JobWasCancelled`, or ``TimeoutError`` after ``timeout``
        seconds (None: no limit). Woken by the store, not by a busy poll."""
        return results.wait(self.runtime, job_id, timeout)

    @overload
    async def await_result(self, job_id: JobId[R], timeout: float | None = None) -> R: ...

    @overload
    async def await_result(self, job_id: int, timeout: float | None = None) -> Any: ...

    async def await_result(self, job_id: int, timeout: float | None = None) -> Any:
        """:meth:`wait` for event loops: never blocks the caller's loop."""
        return await results.await_result(self.runtime, job_id, timeout)

    # -- working -----------------------------------------------------------------------------
    def worker(self, *, concurrency: int | None = None,
               queues: Sequence[str] | Mapping[str, int | None] | None = None,
               maintenance: bool = True, pool: str = "thread", app_spec: str | None = None,
               max_tasks_per_child: int | None = None,
               max_memory_per_child: float | None = None,
               schedules: bool = True) -> Worker:
        """A worker (not started). ``pool="process"`` runs handlers in ``concurrency`` child
        processes that import this app by ``app_spec`` (``"module:attribute"``; derived from
        the module holding the app when not given); see docs/guarantees.md for choosing.
        The ``include`` modules are imported now, so their tasks' queues are served."""
        self.runtime.registry.import_includes()
        return Worker(self.runtime, concurrency=concurrency, queues=queues,
                      maintenance=maintenance, pool=pool, app_spec=app_spec,
                      max_tasks_per_child=max_tasks_per_child,
                      max_memory_per_child=max_memory_per_child, schedules=schedules)

    def run_worker(self, *, concurrency: int | None = None,
                   queues: Sequence[str] | Mapping[str, int | None] | None = None,
                   maintenance: bool = True, pool: str = "thread", app_spec: str | None = None,
                   max_tasks_per_child: int | None = None,
                   max_memory_per_child: float | None = None) -> int:
        """Run a worker in this thread until SIGTERM/SIGINT; returns the exit code."""
        worker = self.worker(concurrency=concurrency, queues=queues, maintenance=maintenance,
                             pool=pool, app_spec=app_spec,
                             max_tasks_per_child=max_tasks_per_child,
                             max_memory_per_child=max_memory_per_child)
        return worker.run()
