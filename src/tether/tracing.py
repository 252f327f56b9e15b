"""OpenTelemetry tracing (the ``otel`` extra: ``opentelemetry-api``).

``tether.tracing.instrument(app)`` (call it once, after registering the tasks, in the module
that defines the app, so producers and workers both run it) makes:

* a **producer span** ``tether publish <task>`` around every enqueue (one per enqueue call, so
  ``enqueue_many`` of 1,000 jobs is one span), whose context is stored with each job;
* a **consumer span** ``tether process <task>`` around every attempt, *linked* to the producer
  span (a link, not a parent, by default: a job retried over hours should not stretch one trace
  across them; ``parent=True`` makes the producer the parent as well). Spans the handler opens
  are children of it.

Attributes: ``tether.job.id``, ``tether.job.attempt``, ``tether.task``, ``tether.queue``,
``tether.outcome`` (done, error, retry, dead, cancelled, lease_lost, released), and the
``messaging.*`` conventions.

Where the context lives: in the payload's *envelope*, a third element after ``[args, kwargs]``
(``{"trace": {"traceparent": ...}}``) that the executor strips before calling the handler.
Not in the kwargs (the handler would receive it), and not in a new store column (three stores'
schemas would change for an optional feature). Workers older than this envelope refuse such
payloads as ``bad_arguments``: upgrade workers before producers turn tracing on.

Without an SDK configured, OpenTelemetry's API is a no-op: nothing is written into payloads.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from tether import _payload as payload
from tether._context import current_job
from tether._errors import (
    Fail,
    JobCancelled,
    LeaseInterrupted,
    Retry,
    ShuttingDown,
    Snooze,
    TetherError,
)
from tether.stores._contract import NewJob

if TYPE_CHECKING:
    from tether._app import App
    from tether._runtime import Runtime
    from tether._task import Task

SCOPE = "tether"
_MARK = "_tether_traced"


def _outcome(exc: BaseException, will_retry: bool) -> str:
    if isinstance(exc, JobCancelled):
        return "cancelled"
    if isinstance(exc, LeaseInterrupted):
        return "lease_lost"
    if isinstance(exc, ShuttingDown):
        return "released"
    if isinstance(exc, Fail):
        return "dead"
    if isinstance(exc, Snooze):
        return "snoozed"
    if isinstance(exc, Retry):
        return "retry"
    return "retry" if will_retry else "dead"


class Tracing:
    def __init__(self, runtime: Runtime, tracer_provider: trace.TracerProvider | None,
                 parent: bool) -> None:
        from tether._version import __version__

        self.runtime = runtime
        self.parent = parent
        self.tracer = trace.get_tracer(SCOPE, __version__, tracer_provider=tracer_provider)

    # -- producer ------------------------------------------------------------------------------
    @contextmanager
    def _publish(self, jobs: Sequence[NewJob]) -> Iterator[tuple[Sequence[NewJob], Any]]:
        """The producer span of one enqueue call, and the jobs carrying its context."""
        first = jobs[0]
        attrs: dict[str, Any] = {
            "messaging.system": "tether", "messaging.operation.type": "send",
            "messaging.destination.name": first.queue, "tether.task": first.task,
            "tether.queue": first.queue, "messaging.batch.message_count": len(jobs),
        }
        with self.tracer.start_as_current_span(f"tether publish {first.task}",
                                               kind=SpanKind.PRODUCER,
                                               attributes=attrs) as span:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            if carrier:
                jobs = [replace(j, payload=payload.with_meta(j.payload, trace=carrier))
                        for j in jobs]
            yield jobs, span

    @staticmethod
    def _published(span: Any, ids: list[int]) -> list[int]:
        if len(ids) == 1:
            span.set_attribute("tether.job.id", ids[0])
        else:
            span.set_attribute("tether.job.ids", list(ids))
        return ids

    def wrap_enqueue(self, enqueue: Callable[..., list[int]]) -> Callable[..., list[int]]:
        @functools.wraps(enqueue)
        def traced(jobs: Sequence[NewJob], *, conn: Any = None) -> list[int]:
            if not jobs:
                return enqueue(jobs, conn=conn)
            with self._publish(jobs) as (carried, span):
                return self._published(span, enqueue(carried, conn=conn))

        return traced

    def wrap_aenqueue(self, enqueue: Callable[..., Awaitable[list[int]]]
                      ) -> Callable[..., Awaitable[list[int]]]:
        """The same for ``App.aenqueue_jobs`` (the async producer API)."""
        @functools.wraps(enqueue)
        async def traced(jobs: Sequence[NewJob], *, conn: Any = None) -> list[int]:
            if not jobs:
                return await enqueue(jobs, conn=conn)
            with self._publish(jobs) as (carried, span):
                return self._published(span, await enqueue(carried, conn=conn))

        return traced

    # -- consumer ------------------------------------------------------------------------------
    def _start(self, task: Task[Any, Any]) -> tuple[Any, Any] | None:
        """(the consumer span, the context token to detach) for the current attempt; None
        when the task is called directly, outside a worker."""
        try:
            job = current_job()
        except TetherError:
            return None
        carrier = payload.meta(job.job.payload).get("trace") or {}
        producer = propagate.extract(carrier) if carrier else None
        links = []
        if producer is not None:
            ctx = trace.get_current_span(producer).get_span_context()
            if ctx.is_valid:
                links.append(Link(ctx))
        attrs: dict[str, Any] = {
            "messaging.system": "tether", "messaging.operation.type": "process",
            "messaging.destination.name": job.job.queue, "tether.task": task.name,
            "tether.queue": job.job.queue, "tether.job.id": job.id,
            "tether.job.attempt": job.attempt,
        }
        parent = producer if (self.parent and producer is not None) else otel_context.Context()
        span = self.tracer.start_span(f"tether process {task.name}", context=parent,
                                      kind=SpanKind.CONSUMER, links=links, attributes=attrs)
        token = otel_context.attach(trace.set_span_in_context(span))
        return span, token

    @staticmethod
    def _end(span: Any, token: Any, exc: BaseException | None) -> None:
        try:
            if exc is None:
                span.set_attribute("tether.outcome", "done")
            else:
                job = current_job().job
                retry = job.failures + 1 + job.stall_count < job.max_attempts
                span.set_attribute("tether.outcome", _outcome(exc, retry))
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        finally:
            otel_context.detach(token)
            span.end()

    def wrap_task(self, task: Task[Any, Any]) -> None:
        func = task.func
        if getattr(func, _MARK, False):
            return
        if task.is_async:
            @functools.wraps(func)
            async def traced_async(*args: Any, **kwargs: Any) -> Any:
                started = self._start(task)
                if started is None:
                    return await func(*args, **kwargs)
                span, token = started
                try:
                    result = await func(*args, **kwargs)
                except BaseException as exc:
                    self._end(span, token, exc)
                    raise
                self._end(span, token, None)
                return result

            wrapper: Callable[..., Any] = traced_async
        else:
            @functools.wraps(func)
            def traced(*args: Any, **kwargs: Any) -> Any:
                started = self._start(task)
                if started is None:
                    return func(*args, **kwargs)
                span, token = started
                try:
                    result = func(*args, **kwargs)
                except BaseException as exc:
                    self._end(span, token, exc)
                    raise
                self._end(span, token, None)
                return result

            wrapper = traced
        setattr(wrapper, _MARK, True)
        task.func = wrapper


def instrument(app: App, *, tracer_provider: trace.TracerProvider | None = None,
               parent: bool = False) -> None:
    """Trace ``app``'s enqueues and its tasks' attempts (see the module doc). Idempotent;
    tasks registered later are traced by calling it again."""
    runtime = app.runtime
    tracing: Tracing | None = getattr(runtime, "_tether_tracing", None)
    if tracing is None:
        tracing = Tracing(runtime, tracer_provider, parent)
        # The one seam every enqueue goes through (Task.enqueue, enqueue_many, App.enqueue,
        # App.enqueue_jobs): the runtime's.
        setattr(runtime, "enqueue_jobs",  # noqa: B010
                tracing.wrap_enqueue(runtime.enqueue_jobs))
        setattr(runtime, "aenqueue_jobs",  # noqa: B010
                tracing.wrap_aenqueue(runtime.aenqueue_jobs))
        setattr(runtime, "_tether_tracing", tracing)  # noqa: B010
    for task in runtime.registry.tasks.values():
        tracing.wrap_task(task)
