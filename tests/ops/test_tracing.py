"""OpenTelemetry: a producer span at enqueue, its context in the payload's envelope, a
consumer span per attempt linked to it (SDK in-memory exporter, a real in-process worker)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind

import tether
from tests.worker.helpers import running, wait_until
from tether import _payload as payload
from tether import tracing

FAST = tether.Backoff(base=0.05, factor=1.0, max=0.05, jitter=0.0)


def test_producer_and_linked_consumer_spans(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = tether.App(f"sqlite:///{tmp_path / 'otel.db'}", lease_ttl=1.5, poll_interval=0.05)
    seen: list[tuple[object, ...]] = []

    @app.task(name="o.flaky", queue="oq", retry=FAST)
    def flaky(x: int, *, label: str) -> int:
        seen.append((x, label))
        if len(seen) == 1:
            raise ValueError("first attempt fails")
        with provider.get_tracer("user").start_as_current_span("inside the handler"):
            return x * 2

    tracing.instrument(app, tracer_provider=provider)
    tracing.instrument(app, tracer_provider=provider)  # idempotent
    try:
        job_id = flaky.enqueue(21, label="a")
        job = app.get_job(job_id)
        assert job.args == [21] and job.kwargs == {"label": "a"}  # the envelope is tether's
        record = app.store.get_job(job_id)
        assert record is not None and "traceparent" in payload.meta(record.payload)["trace"]
        with running(app, concurrency=1):
            wait_until(lambda: app.get_job(job_id).status == "done", what="the job")
        assert app.get_job(job_id).result == 42
        assert seen == [(21, "a"), (21, "a")]
        assert flaky(5, label="direct") == 10  # a direct call outside a worker still works
    finally:
        app.close()
    spans = exporter.get_finished_spans()
    producer = [s for s in spans if s.kind == SpanKind.PRODUCER]
    consumers = sorted((s for s in spans if s.kind == SpanKind.CONSUMER),
                       key=lambda s: s.attributes["tether.job.attempt"])  # type: ignore[index]
    assert len(producer) == 1 and producer[0].name == "tether publish o.flaky"
    assert producer[0].attributes["tether.job.id"] == job_id  # type: ignore[index]
    assert [c.attributes["tether.outcome"] for c in consumers] == ["retry", "done"]  # type: ignore[index]
    for n, c in enumerate(consumers, 1):
        assert c.name == "tether process o.flaky"
        assert c.attributes["tether.job.id"] == job_id  # type: ignore[index]
        assert c.attributes["tether.job.attempt"] == n  # type: ignore[index]
        assert c.attributes["tether.queue"] == "oq"  # type: ignore[index]
        assert [link.context.span_id for link in c.links] == [producer[0].context.span_id]
        assert c.parent is None  # linked, not a child
    inner = next(s for s in spans if s.name == "inside the handler")
    assert inner.parent is not None and inner.parent.span_id == consumers[1].context.span_id


def test_without_a_recording_span_nothing_is_added(tmp_path: Path) -> None:
    app = tether.App(f"sqlite:///{tmp_path / 'plain.db'}")

    @app.task(name="o.plain")
    def plain() -> None: ...

    tracing.instrument(app)  # API only: the global provider is a no-op
    try:
        record = app.store.get_job(plain.enqueue())
        assert record is not None and payload.meta(record.payload) == {}
    finally:
        app.close()


def test_async_enqueue_is_traced_and_typed_arguments_still_decode(tmp_path: Path) -> None:
    """``aenqueue`` gets the same producer span and envelope as ``enqueue``; a traced
    handler (wrapped by instrument) still has its annotations read for the codec."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = tether.App(f"sqlite:///{tmp_path / 'aotel.db'}", lease_ttl=1.5, poll_interval=0.05)

    @app.task(name="o.later")
    def later(at: datetime) -> datetime:
        assert type(at) is datetime
        return at + timedelta(days=1)

    tracing.instrument(app, tracer_provider=provider)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    try:
        job_id = asyncio.run(later.aenqueue(at))
        record = app.store.get_job(job_id)
        assert record is not None and "traceparent" in payload.meta(record.payload)["trace"]
        with running(app, concurrency=1):
            assert app.wait(job_id, timeout=20) == at + timedelta(days=1)
    finally:
        app.close()
    spans = exporter.get_finished_spans()
    [producer] = [s for s in spans if s.kind == SpanKind.PRODUCER]
    assert producer.name == "tether publish o.later"
    assert producer.attributes["tether.job.id"] == job_id  # type: ignore[index]
    [consumer] = [s for s in spans if s.kind == SpanKind.CONSUMER]
    assert consumer.attributes["tether.outcome"] == "done"  # type: ignore[index]


def test_parent_mode_puts_each_attempt_in_the_enqueuers_trace(tmp_path: Path) -> None:
    """``instrument(app, parent=True)``: the consumer span is a child of the producer span
    (one trace from the request that enqueued to the handler's own spans), and still linked."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = tether.App(f"sqlite:///{tmp_path / 'otel.db'}", lease_ttl=1.5, poll_interval=0.05)

    @app.task(name="o.child")
    def child() -> None:
        with provider.get_tracer("user").start_as_current_span("handler work"):
            pass

    tracing.instrument(app, tracer_provider=provider, parent=True)
    try:
        with provider.get_tracer("web").start_as_current_span("POST /signup"):
            job_id = child.enqueue()
        with running(app, concurrency=1):
            wait_until(lambda: app.get_job(job_id).status == "done", what="the job")
    finally:
        app.close()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    request, producer = spans["POST /signup"], spans["tether publish o.child"]
    consumer, inner = spans["tether process o.child"], spans["handler work"]
    assert producer.parent is not None and producer.parent.span_id == request.context.span_id
    assert consumer.parent is not None and consumer.parent.span_id == producer.context.span_id
    assert [link.context.span_id for link in consumer.links] == [producer.context.span_id]
    assert inner.parent is not None and inner.parent.span_id == consumer.context.span_id
    assert len({s.context.trace_id for s in (request, producer, consumer, inner)}) == 1
