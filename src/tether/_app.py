"""``App``: the entry point users hold. Tasks, enqueueing, inspection, results, a worker.

Import order (no cycle): ``app`` imports ``task`` and the worker; neither imports ``app``
(they name it for the type checker only), so a test can walk the package's imports and find
no cycle (tests/test_imports.py).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import threading
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import replace
from typing import Any, ParamSpec, TypeVar, overload

from tether import _clock as clock
from tether import _results as results
from tether._backoff import Backoff
from tether._codec import DEFAULT_CODEC, Codec
from tether._config import Settings, make_settings
from tether._errors import ConfigError, JobNotFound, StoreUnavailable
from tether._events import Callback, Events
from tether._jobid import JobId
from tether._jobview import Job, view
from tether._newjob import OPTIONS, TaskOptions, make_new_job
from tether._task import Task, TaskDecorator
from tether._worker.worker import Worker
from tether.stores import DEFAULT_URL, open_store
from tether.stores._contract import (
    AsyncProducer,
    CancelResult,
    NewJob,
    Producer,
    RetryResult,
    Store,
    transactional_enqueue,
)
from tether.stores._records import JobRecord
from tether.stores._replay import new_request_id

P = ParamSpec("P")
R = TypeVar("R")
TaskT = TypeVar("TaskT", bound=Task[Any, Any])  # @app.periodic hands the task back, typed

#: Pauses between the attempts of one enqueue while the store is unavailable (~1 s in all).
ENQUEUE_RETRY_PAUSES = (0.1, 0.3, 0.6)
#: Options ``App.enqueue`` takes beyond ``Task.enqueue``'s: the job's budgets.
BUDGETS = frozenset({"max_attempts", "max_stalls"})


class App:
    """A tether application: one store, a registry of tasks, settings and event callbacks.

    ``url`` defaults to ``$TETHER_URL``, else an SQLite file ``./tether.db``. ``codec``
    carries arguments and results (default :class:`tether._codec.JSONCodec`). ``include``
    names modules that declare tasks, imported when a worker starts (and when a task name is
    looked up and unknown). Options are the fields of :class:`tether._config.Settings`
    (``lease_ttl``, ``heartbeat_interval``, ...); a wrong or unknown option raises
    ConfigError at once.
    """

    def __init__(self, url: str | None = None, *, auto_migrate: bool = True,
                 codec: Codec | None = None, include: Iterable[str] = (),
                 **options: Any) -> None:
        self._url = url or os.environ.get("TETHER_URL") or DEFAULT_URL
        self.settings: Settings = make_settings(**options)
        self.auto_migrate = auto_migrate
        if codec is not None and not (callable(getattr(codec, "encode", None))
                                      and callable(getattr(codec, "decode", None))):
            raise ConfigError("codec must have encode(value) and decode(value, type) methods "
                              "(see tether._codec.Codec)")
        self.codec: Codec = codec if codec is not None else DEFAULT_CODEC
        if isinstance(include, str):
            include = [include]
        self.include: tuple[str, ...] = tuple(include)
        if not all(isinstance(m, str) and m for m in self.include):
            raise ConfigError(f"include must be module names, got {self.include!r}")
        self._included = not self.include
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.events = Events()
        self._store: Store | None = None
        self._producing = False  # an async producer was handed out (aclose closes it)
        self._lock = threading.RLock()

    # -- store -------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return self._url

    @url.setter
    def url(self, url: str) -> None:
        """A new URL closes the store opened on the old one (the next use opens the new one):
        keeping it would leave this app reading and writing where the URL no longer points
        (a worker given ``--url`` claimed from the module's store while heartbeating on its
        own)."""
        with self._lock:
            if url != self._url:
                self.close()
            self._url = url

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

    async def async_producer(self) -> AsyncProducer:
        """The store's async producer; the store is opened (a blocking connect and
        migration) on a thread, so the caller's event loop never waits on it."""
        store = self._store
        if store is None:
            store = await asyncio.to_thread(lambda: self.store)
        self._producing = True
        return store.async_producer()

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    async def aclose(self) -> None:
        """``close`` for event loops (e.g. a FastAPI lifespan's end): the async producer is
        closed on the loop (its connections belong to it), then the store on a thread."""
        store = self._store
        if store is not None and self._producing:
            self._producing = False
            await store.async_producer().aclose()
        await asyncio.to_thread(self.close)

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
        retry: Backoff | None = None, priority: int = 0,
    ) -> TaskDecorator: ...

    def task(
        self, func: Callable[..., Any] | None = None, /, *, name: str | None = None,
        queue: str = "default", max_attempts: int = 5, max_stalls: int = 3,
        timeout: float | None = None, retry: Backoff | None = None, priority: int = 0,
    ) -> Task[Any, Any] | TaskDecorator:
        """Register a function (plain or ``async def``) as a task; usable bare or with options."""

        def register(f: Callable[..., Any]) -> Task[Any, Any]:
            task_name = f"{f.__module__}.{f.__qualname__}" if name is None else name
            if task_name in self.tasks:
                raise ConfigError(f"a task named {task_name!r} is already registered")
            task: Task[Any, Any] = Task(self, f, TaskOptions(
                task_name, queue, max_attempts, max_stalls, timeout, retry or Backoff(),
                priority))
            self.tasks[task_name] = task
            return task

        return register(func) if func is not None else register

    def import_includes(self) -> None:
        """Import the modules of ``include`` (once; a failed import is tried again next
        time). An error names the module."""
        if self._included:
            return
        with self._lock:
            if self._included:
                return
            for module in self.include:
                try:
                    importlib.import_module(module)
                except Exception as exc:
                    raise ConfigError(f"cannot import {module!r} (listed in App(include=...)): "
                                      f"{type(exc).__name__}: {exc}") from exc
            self._included = True

    def find_task(self, name: str) -> Task[Any, Any] | None:
        """The task registered as ``name``; the ``include`` modules are imported first when
        it is not known yet. None when no module declares it."""
        task = self.tasks.get(name)
        if task is None and not self._included:
            self.import_includes()
            task = self.tasks.get(name)
        return task

    def queues(self) -> list[str]:
        """The queues of the registered tasks (``["default"]`` when there are none)."""
        return sorted({t.config.queue for t in self.tasks.values()}) or ["default"]

    def on(self, event: str, callback: Callback) -> Callback:
        """Subscribe a plain callback to an event (see tether._events.EVENTS)."""
        return self.events.on(event, callback)

    def periodic(self, *, every: float | None = None, cron: str | None = None,
                 tz: str | None = None, args: Sequence[Any] = (),
                 kwargs: dict[str, Any] | None = None, catch_up: str = "latest",
                 name: str | None = None) -> Callable[[TaskT], TaskT]:
        """Run a task on a schedule (``every=`` seconds or ``cron=``), stacked above
        ``@app.task``; the maintenance leader enqueues one job per tick. See
        docs/periodic.md (tether._periodic)."""
        from tether._periodic import declare

        return declare(self, every=every, cron=cron, tz=tz, args=args, kwargs=kwargs,
                       catch_up=catch_up, name=name)

    # -- producing ---------------------------------------------------------------------------
    def enqueue_jobs(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[int]:
        """Insert jobs in one round trip; ``conn`` puts them in the caller's transaction.

        A transient failure (:class:`~tether._errors.StoreUnavailable`) is retried a few
        times within about a second, always with the same request id: when the store did the
        insert but the reply was lost, it answers the retry from its record of that request
        instead of inserting the jobs twice. Then the error is raised. Inside a caller's
        transaction nothing is retried: the transaction is the caller's to retry.
        """
        if not jobs:
            return []
        store: Producer = self.store
        if conn is not None:
            inside = transactional_enqueue(store)
            if inside is None:
                raise ConfigError(
                    f"the {store.kind} store cannot enqueue inside a caller's transaction")
            return inside.enqueue(jobs, conn=conn)
        request_id = new_request_id()
        for pause in (*ENQUEUE_RETRY_PAUSES, None):
            try:
                return store.enqueue(jobs, request_id=request_id)
            except StoreUnavailable:
                if pause is None:
                    raise
                clock.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover

    async def aenqueue_jobs(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[int]:
        """:meth:`enqueue_jobs` for event loops, through the store's async producer: the
        same replay-safe retry (one request id for every attempt), with ``asyncio.sleep``
        between attempts. ``conn`` is the caller's async connection (nothing is retried)."""
        if not jobs:
            return []
        producer = await self.async_producer()
        if conn is not None:
            store: Producer = self.store  # opened by async_producer
            if not store.capabilities.enqueue_in_transaction:
                raise ConfigError(
                    f"conn= is not supported by the {store.kind} store's async producer (only "
                    "PostgreSQL enqueues inside a caller's transaction)")
            return await producer.enqueue(jobs, conn=conn)
        request_id = new_request_id()
        for pause in (*ENQUEUE_RETRY_PAUSES, None):
            try:
                return await producer.enqueue(jobs, request_id=request_id)
            except StoreUnavailable:
                if pause is None:
                    raise
                await asyncio.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover

    def enqueue(self, task: str, *args: Any, kwargs: dict[str, Any] | None = None,
                **keywords: Any) -> JobId[Any]:
        """Enqueue by task name (for producers that do not import the task's code).

        ``kwargs`` carries the task's keyword arguments, whatever their names. Other keywords
        are enqueue options (``delay``, ``run_at``, ``priority``, ``unique_key``, ``queue``,
        ``conn``, and ``max_attempts``/``max_stalls``, which override the task's) or, for any
        other name, task arguments; a keyword that names both an option and a parameter of a
        task this app knows raises TypeError (see ``Task.enqueue``).
        """
        names = OPTIONS | BUDGETS
        options = {k: keywords.pop(k) for k in names & keywords.keys()}
        both = sorted(keywords.keys() & (kwargs or {}).keys())
        if both:
            raise TypeError(f"{', '.join(both)} given both as a keyword and in kwargs=")
        merged = {**(kwargs or {}), **keywords}
        conn = options.pop("conn", None)
        known = self.find_task(task)
        if known is None:
            job = make_new_job(task, args, merged, codec=self.codec, **options)
            return JobId(self.enqueue_jobs([job], conn=conn)[0])
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
        return JobId(self.enqueue_jobs([new], conn=conn)[0])

    # -- inspecting and steering -------------------------------------------------------------
    def view(self, record: JobRecord, *, imports: bool = True) -> Job:
        """The public view of a store record, decoded by this app's codec (and the task's
        annotations when this app knows the task). ``imports=False``: never import the
        ``include`` modules here (an event loop's caller did, or tried, on a thread)."""
        return view(record, self.codec, self.reading_task(record.task, imports=imports))

    def reading_task(self, name: str, *, imports: bool = True) -> Task[Any, Any] | None:
        """The task that decodes a stored job's values for a read (``imports``: as in
        :meth:`view`); a broken include is not a read's error (the worker reports it; the
        read shows plain JSON), so it gives only the tasks already known."""
        try:
            return self.find_task(name) if imports else self.tasks.get(name)
        except ConfigError:
            return self.tasks.get(name)

    def get_job(self, job_id: int) -> Job:
        """The job as it is now (:class:`tether.Job`); JobNotFound for an unknown id."""
        record = self.store.get_job(job_id)
        if record is None:
            raise JobNotFound(job_id)
        return self.view(record)

    async def aget_job(self, job_id: int) -> Job:
        """:meth:`get_job` for event loops."""
        record = await (await self.async_producer()).get_job(job_id)
        if record is None:
            raise JobNotFound(job_id)
        await self.aimport_includes()
        return self.view(record, imports=False)

    async def aimport_includes(self) -> None:
        """:meth:`import_includes` on a thread, for the async reads that decode by a task's
        annotations: an import reads files and runs module code (a Django project's takes
        seconds), which must not hold the caller's event loop. A broken include is left to
        :meth:`view` (plain JSON) and the worker (which reports it)."""
        if self._included:
            return
        try:
            await asyncio.to_thread(self.import_includes)
        except ConfigError:
            pass

    def cancel(self, job_id: int) -> CancelResult:
        """Pending: cancelled now. Running: its handler is told at the next heartbeat."""
        return self.store.cancel(job_id)

    async def acancel(self, job_id: int) -> CancelResult:
        """:meth:`cancel` for event loops."""
        return await (await self.async_producer()).cancel(job_id)

    def retry_failed(self, job_ids: Sequence[int] | None = None) -> RetryResult:
        """Dead-letter retry; jobs whose unique_key a live job holds stay failed and are
        listed in ``conflicts``."""
        return self.store.retry_failed(job_ids)

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
        return results.wait(self, job_id, timeout)

    @overload
    async def await_result(self, job_id: JobId[R], timeout: float | None = None) -> R: ...

    @overload
    async def await_result(self, job_id: int, timeout: float | None = None) -> Any: ...

    async def await_result(self, job_id: int, timeout: float | None = None) -> Any:
        """:meth:`wait` for event loops: never blocks the caller's loop."""
        return await results.await_result(self, job_id, timeout)

    # -- working -----------------------------------------------------------------------------
    def worker(self, *, concurrency: int = 10, queues: Sequence[str] | None = None,
               maintenance: bool = True, pool: str = "thread", app_spec: str | None = None,
               max_tasks_per_child: int | None = None,
               max_memory_per_child: float | None = None,
               schedules: bool = True) -> Worker:
        """A worker (not started). ``pool="process"`` runs handlers in ``concurrency`` child
        processes that import this app by ``app_spec`` (``"module:attribute"``; derived from
        the module holding the app when not given); see docs/guarantees.md for choosing.
        The ``include`` modules are imported now, so their tasks' queues are served."""
        self.import_includes()
        return Worker(self, concurrency=concurrency, queues=queues, maintenance=maintenance,
                      pool=pool, app_spec=app_spec, max_tasks_per_child=max_tasks_per_child,
                      max_memory_per_child=max_memory_per_child, schedules=schedules)

    def run_worker(self, *, concurrency: int = 10, queues: Sequence[str] | None = None,
                   maintenance: bool = True, pool: str = "thread", app_spec: str | None = None,
                   max_tasks_per_child: int | None = None,
                   max_memory_per_child: float | None = None) -> int:
        """Run a worker in this thread until SIGTERM/SIGINT; returns the exit code."""
        worker = self.worker(concurrency=concurrency, queues=queues, maintenance=maintenance,
                             pool=pool, app_spec=app_spec,
                             max_tasks_per_child=max_tasks_per_child,
                             max_memory_per_child=max_memory_per_child)
        return worker.run()
