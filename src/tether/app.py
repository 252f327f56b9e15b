"""``App``: the entry point users hold. Tasks, enqueueing, inspection, and running a worker."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, overload

from tether import clock
from tether.backoff import Backoff
from tether.config import Settings, make_settings
from tether.errors import ConfigError, JobNotFound, StoreUnavailable
from tether.events import Callback, Events
from tether.stores import DEFAULT_URL, open_store
from tether.stores.base import CancelResult, Job, NewJob, RetryResult, Store
from tether.stores.replay import new_request_id
from tether.task import Task, TaskOptions

#: Pauses between the attempts of one enqueue while the store is unavailable (~1 s in all).
ENQUEUE_RETRY_PAUSES = (0.1, 0.3, 0.6)
#: Options ``App.enqueue`` takes beyond ``Task.enqueue``'s: the job's budgets.
BUDGETS = frozenset({"max_attempts", "max_stalls"})


class App:
    """A tether application: one store, a registry of tasks, settings and event callbacks.

    ``url`` defaults to ``$TETHER_URL``, else an SQLite file ``./tether.db``. Options are the
    fields of :class:`tether.config.Settings` (``lease_ttl``, ``heartbeat_interval``, ...);
    a wrong or unknown option raises ConfigError at once.
    """

    def __init__(self, url: str | None = None, *, auto_migrate: bool = True,
                 **options: Any) -> None:
        self.url = url or os.environ.get("TETHER_URL") or DEFAULT_URL
        self.settings: Settings = make_settings(**options)
        self.auto_migrate = auto_migrate
        self.tasks: dict[str, Task] = {}
        self.events = Events()
        self._store: Store | None = None
        self._lock = threading.Lock()

    # -- store -------------------------------------------------------------------------------
    @property
    def store(self) -> Store:
        """The store, opened (and migrated, unless auto_migrate=False) on first use."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    store = open_store(self.url)
                    try:
                        store.migrate() if self.auto_migrate else store.check_schema()
                    except BaseException:
                        store.close()
                        raise
                    self._store = store
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tasks -------------------------------------------------------------------------------
    @overload
    def task(self, func: Callable[..., Any], /) -> Task: ...

    @overload
    def task(
        self, func: None = None, /, *, name: str | None = None, queue: str = "default",
        max_attempts: int = 5, max_stalls: int = 3, timeout: float | None = None,
        retry: Backoff | None = None, priority: int = 0,
    ) -> Callable[[Callable[..., Any]], Task]: ...

    def task(
        self, func: Callable[..., Any] | None = None, /, *, name: str | None = None,
        queue: str = "default", max_attempts: int = 5, max_stalls: int = 3,
        timeout: float | None = None, retry: Backoff | None = None, priority: int = 0,
    ) -> Task | Callable[[Callable[..., Any]], Task]:
        """Register a function (plain or ``async def``) as a task; usable bare or with options."""

        def register(f: Callable[..., Any]) -> Task:
            task_name = f"{f.__module__}.{f.__qualname__}" if name is None else name
            if task_name in self.tasks:
                raise ConfigError(f"a task named {task_name!r} is already registered")
            task = Task(self, f, TaskOptions(task_name, queue, max_attempts, max_stalls,
                                             timeout, retry or Backoff(), priority))
            self.tasks[task_name] = task
            return task

        return register(func) if func is not None else register

    def queues(self) -> list[str]:
        """The queues of the registered tasks (``["default"]`` when there are none)."""
        return sorted({t.options.queue for t in self.tasks.values()}) or ["default"]

    def on(self, event: str, callback: Callback) -> Callback:
        """Subscribe a plain callback to an event (see tether.events.EVENTS)."""
        return self.events.on(event, callback)

    # -- producing ---------------------------------------------------------------------------
    def enqueue_jobs(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[int]:
        """Insert jobs in one round trip; ``conn`` puts them in the caller's transaction.

        A transient failure (:class:`~tether.errors.StoreUnavailable`) is retried a few
        times within about a second, always with the same request id: when the store did the
        insert but the reply was lost, it answers the retry from its record of that request
        instead of inserting the jobs twice. Then the error is raised. Inside a caller's
        transaction nothing is retried: the transaction is the caller's to retry.
        """
        if not jobs:
            return []
        if conn is not None:
            try:
                return self.store.enqueue(jobs, conn=conn)  # type: ignore[call-arg]
            except TypeError:
                raise ConfigError(
                    f"the {self.store.kind} store cannot enqueue inside a caller's transaction"
                ) from None
        store = self.store
        request_id = new_request_id()
        for pause in (*ENQUEUE_RETRY_PAUSES, None):
            try:
                return store.enqueue(jobs, request_id=request_id)
            except StoreUnavailable:
                if pause is None:
                    raise
                clock.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover

    def enqueue(self, task: str, *args: Any, kwargs: dict[str, Any] | None = None,
                **keywords: Any) -> int:
        """Enqueue by task name (for producers that do not import the task's code).

        ``kwargs`` carries the task's keyword arguments, whatever their names. Other keywords
        are enqueue options (``delay``, ``run_at``, ``priority``, ``unique_key``, ``queue``,
        ``conn``, and ``max_attempts``/``max_stalls``, which override the task's) or, for any
        other name, task arguments; a keyword that names both an option and a parameter of a
        task this app knows raises TypeError (see ``Task.enqueue``).
        """
        from tether.task import OPTIONS, make_new_job

        names = OPTIONS | BUDGETS
        options = {k: keywords.pop(k) for k in names & keywords.keys()}
        both = sorted(keywords.keys() & (kwargs or {}).keys())
        if both:
            raise TypeError(f"{', '.join(both)} given both as a keyword and in kwargs=")
        merged = {**(kwargs or {}), **keywords}
        conn = options.pop("conn", None)
        known = self.tasks.get(task)
        if known is None:
            return self.enqueue_jobs([make_new_job(task, args, merged, **options)], conn=conn)[0]
        clash = sorted(known.params & (options.keys() | ({"conn"} if conn is not None else set())))
        if clash:
            raise TypeError(
                f"{task} has a parameter named {', '.join(clash)}, which is also an enqueue "
                "option: pass the task's arguments as kwargs={...} and the option as a "
                "keyword, or use the task's enqueue_with"
            )
        budgets = {k: options.pop(k) for k in BUDGETS & options.keys()}
        job = known.new_job(args, merged, **options)
        if budgets:
            job = replace(job, **budgets)
        return self.enqueue_jobs([job], conn=conn)[0]

    # -- inspecting and steering -------------------------------------------------------------
    def get_job(self, job_id: int) -> Job:
        job = self.store.get_job(job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    def cancel(self, job_id: int) -> CancelResult:
        """Pending: cancelled now. Running: its handler is told at the next heartbeat."""
        return self.store.cancel(job_id)

    def retry_failed(self, job_ids: Sequence[int] | None = None) -> RetryResult:
        """Dead-letter retry; jobs whose unique_key a live job holds stay failed and are
        listed in ``conflicts``."""
        return self.store.retry_failed(job_ids)

    # -- working -----------------------------------------------------------------------------
    def worker(self, *, concurrency: int = 10, queues: Sequence[str] | None = None,
               maintenance: bool = True, pool: str = "thread", app_spec: str | None = None,
               max_tasks_per_child: int | None = None,
               max_memory_per_child: float | None = None) -> Any:
        """A worker (not started). ``pool="process"`` runs handlers in ``concurrency`` child
        processes that import this app by ``app_spec`` (``"module:attribute"``; derived from
        the module holding the app when not given); see docs/guarantees.md for choosing."""
        from tether.worker.worker import Worker

        return Worker(self, concurrency=concurrency, queues=queues, maintenance=maintenance,
                      pool=pool, app_spec=app_spec, max_tasks_per_child=max_tasks_per_child,
                      max_memory_per_child=max_memory_per_child)

    def run_worker(self, *, concurrency: int = 10, queues: Sequence[str] | None = None,
                   maintenance: bool = True, pool: str = "thread", app_spec: str | None = None,
                   max_tasks_per_child: int | None = None,
                   max_memory_per_child: float | None = None) -> int:
        """Run a worker in this thread until SIGTERM/SIGINT; returns the exit code."""
        worker = self.worker(concurrency=concurrency, queues=queues, maintenance=maintenance,
                             pool=pool, app_spec=app_spec,
                             max_tasks_per_child=max_tasks_per_child,
                             max_memory_per_child=max_memory_per_child)
        code: int = worker.run()
        return code
