"""The codec: rich Python values cross the store as plain JSON and come back typed, decoded by
the handler's annotations in the worker (threads, asyncio, process pool) and by its return
annotation in ``get_job``; a custom codec plugs in; bad input is one TypeError at enqueue."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, Optional
from uuid import UUID

import pytest

import tether
from tests.api.typed_tasks import (
    Colour,
    Customer,
    Invoice,
    Point,
    Receipt,
    expected_receipt,
    register,
    sample,
)
from tests.worker.helpers import running, wait_until
from tether._codec import JSONCodec

pytestmark = pytest.mark.timeout(60)
MakeApp = Callable[..., tether.App]
WHEN = datetime(2026, 11, 24, 8, 0, tzinfo=UTC)


def finished(app: tether.App, *ids: int) -> list[tether.Job]:
    wait_until(lambda: all(app.get_job(i).finished for i in ids), 30, "the jobs to finish")
    return [app.get_job(i) for i in ids]


@pytest.mark.parametrize(("value", "type_"), [
    (datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC), datetime),
    (date(2026, 1, 2), date),
    (UUID(int=7), UUID),
    (Decimal("1.10"), Decimal),
    (timedelta(minutes=3), timedelta),
    (Colour.BLUE, Colour),
    (Point(1, 2, "p"), Point),
    ([Point(1, 2)], list[Point]),
    ({"a": Decimal("1")}, dict[str, Decimal]),
    ({1: "a", -2: "b"}, dict[int, str]),  # JSON keys are strings: back to ints by the type
    ({1.5: [2]}, dict[float, list[int]]),
    ({True: None}, dict[bool, None]),
    ((1, "x"), tuple[int, str]),
    ({1, 2}, set[int]),
    (None, Optional[datetime]),  # noqa: UP045 - the typing spelling must work too
    (UUID(int=1), UUID | None),
    (sample()[1], Customer),
    (sample()[0], Invoice),
    (expected_receipt(), Receipt),
])
def test_the_default_codec_round_trips_through_json_text(value: Any, type_: Any) -> None:
    codec = JSONCodec()
    text = json.dumps(codec.encode(value))  # plain JSON, nothing else
    assert codec.decode(json.loads(text), type_) == value
    # the one-pass writer the enqueue path uses says exactly the same
    assert json.loads(codec.dumps(value)) == json.loads(text)


def test_without_a_type_values_stay_plain_json() -> None:
    codec = JSONCodec()
    plain = codec.encode({"at": WHEN, "id": UUID(int=3), "n": Decimal("2.5")})
    assert plain == {"at": "2026-11-24T08:00:00+00:00",
                     "id": "00000000-0000-0000-0000-000000000003", "n": "2.5"}
    assert codec.decode(plain, Any) == plain


@pytest.mark.parametrize(("value", "message"), [
    (datetime(2026, 1, 1), "naive datetime 2026-01-01T00:00:00 has no timezone"),
    (object(), "cannot carry a builtins.object"),
    (b"bytes", "cannot carry a builtins.bytes"),
    ({(1, 2): "x"}, "keys must be str, int, float, bool or None"),
    (float("nan"), "JSON-serializable"),
    (float("-inf"), "JSON-serializable"),
    pytest.param(10**5000, "Exceeds the limit", id="huge-int"),  # past int-to-text: refused
])
def test_what_the_codec_cannot_carry_is_one_type_error_and_nothing_is_enqueued(
    make_app: MakeApp, value: Any, message: str,
) -> None:
    app = make_app()
    register(app)
    when = app.runtime.registry.tasks["typed.when"]
    with pytest.raises(TypeError, match=r"arguments of typed\.when must be JSON-serializable") \
            as caught:
        when.enqueue(value)
    assert message in str(caught.value)
    with pytest.raises(TypeError, match="JSON-serializable"):
        when.enqueue_many([((WHEN,), {}), ((value,), {})])  # the whole batch, not half
    assert app.store.list_jobs() == []


def test_typed_arguments_and_results_cross_the_thread_pool(make_app: MakeApp) -> None:
    app = make_app()
    register(app)
    invoice, customer = sample()
    tasks = app.runtime.registry.tasks
    settle, shift = tasks["typed.settle"], tasks["typed.shift"]
    a = settle.enqueue(invoice, customer, Decimal("0.01"), when=WHEN, first=date(2026, 1, 1))
    b = shift.enqueue(WHEN, timedelta(hours=2))
    with running(app, concurrency=2):
        done_a, done_b = finished(app, a, b)
    assert done_a.status == "done", done_a.last_error
    assert done_a.result == expected_receipt()
    assert done_a.args == [invoice, customer, Decimal("0.01")]
    assert done_a.kwargs == {"when": WHEN, "first": date(2026, 1, 1)}
    assert (done_b.status, done_b.result) == ("done", WHEN + timedelta(hours=2))


def test_typed_arguments_and_results_cross_the_process_pool(make_app: MakeApp) -> None:
    app = make_app()
    register(app)
    invoice, customer = sample()
    tasks = app.runtime.registry.tasks
    a = tasks["typed.settle"].enqueue(invoice, customer, Decimal("0.01"), when=WHEN)
    b = tasks["typed.shift"].enqueue(WHEN, timedelta(hours=2))
    with running(app, concurrency=1, pool="process", app_spec="tests.api.typed_tasks:app"):
        done_a, done_b = finished(app, a, b)
    assert done_a.status == "done", done_a.last_error
    assert done_a.result == expected_receipt()
    assert done_b.result == WHEN + timedelta(hours=2)


def test_unannotated_handlers_get_plain_json(make_app: MakeApp) -> None:
    app = make_app()
    register(app)
    job_id = app.runtime.registry.tasks["typed.plain"].enqueue(WHEN, other=UUID(int=5))
    with running(app, concurrency=1):
        [job] = finished(app, job_id)
    assert job.result == {"value": WHEN.isoformat(), "kind": "str",
                          "other": "00000000-0000-0000-0000-000000000005"}


def test_stored_arguments_the_annotations_refuse_are_bad_arguments(make_app: MakeApp) -> None:
    """A producer that does not import the task (enqueue by name) sent a value the annotation
    cannot take: the job is dead-lettered at once, never retried."""
    app = make_app()
    register(app)
    job_id = app.enqueue("typed.when", "not a date")
    with running(app, concurrency=1):
        [job] = finished(app, job_id)
    assert (job.status, job.failure_reason, job.attempt) == ("failed", "bad_arguments", 1)
    assert "do not decode as its annotations say (at)" in (job.last_error or "")


class ComplexCodec:
    """A custom codec: complex numbers as [re, im]; everything else as the default does."""

    def __init__(self) -> None:
        self.default = JSONCodec()
        self.encoded: list[Any] = []

    def encode(self, value: Any) -> Any:
        self.encoded.append(value)
        if isinstance(value, complex):
            return [value.real, value.imag]
        if isinstance(value, list):
            return [self.encode(v) for v in value]
        if isinstance(value, dict):
            return {k: self.encode(v) for k, v in value.items()}
        return self.default.encode(value)

    def decode(self, value: Any, type_: Any) -> Any:
        if type_ is complex:
            return complex(*value)
        return self.default.decode(value, type_)


def test_a_custom_codec_carries_what_the_default_cannot(make_app: MakeApp) -> None:
    codec = ComplexCodec()
    app = make_app(codec=codec)
    assert app.runtime.codec is codec

    @app.task(max_attempts=1)
    def square(z: complex) -> complex:
        assert type(z) is complex
        return z * z

    with pytest.raises(TypeError, match=r"cannot carry a builtins\.object"):
        square.enqueue(object())  # type: ignore[arg-type]
    job_id = square.enqueue(1 + 2j)
    record = app.store.get_job(job_id)
    assert record is not None and json.loads(record.payload) == [[[1.0, 2.0]], {}]
    with running(app, concurrency=1):
        [job] = finished(app, job_id)
    assert (job.status, job.result, job.args) == ("done", -3 + 4j, [1 + 2j])
    assert -3 + 4j in codec.encoded, "the worker encoded the result with the app's codec"
    with pytest.raises(tether.ConfigError, match="codec must have encode"):
        tether.App(app.runtime.url, codec=object())  # type: ignore[arg-type]


def test_checkpoint_and_progress_go_through_the_codec(make_app: MakeApp) -> None:
    app = make_app()

    refused: list[str] = []

    @app.task(max_attempts=2, retry=tether.Backoff(base=0.01, factor=1, max=0.01, jitter=0))
    def resumable() -> str:
        ctx = tether.current_job()
        if ctx.checkpoint is None:
            try:
                ctx.save_checkpoint(datetime(2026, 1, 1))  # naive: refused, nothing written
            except TypeError as exc:
                refused.append(str(exc))
            ctx.save_checkpoint({"at": WHEN, "id": UUID(int=9)})
            ctx.set_progress(Decimal("0.5"))
            raise RuntimeError("crash after checkpoint")
        return str(ctx.checkpoint["at"])

    job_id = resumable.enqueue()
    with running(app, concurrency=1):
        [job] = finished(app, job_id)
    assert (job.status, job.result) == ("done", WHEN.isoformat())
    assert job.checkpoint == {"at": WHEN.isoformat(), "id": str(UUID(int=9))}
    assert job.progress == "0.5"
    assert len(refused) == 1 and "checkpoint must be JSON-serializable" in refused[0]
    assert "naive datetime" in refused[0]


@pytest.mark.parametrize(("value", "type_"), [
    ("2026-01-02T03:04:05", datetime),  # naive: which instant is it? every zone reads another
    ("abc", int),
    (5, UUID),
    ({"hex": "x"}, UUID),
    (1.5, int),
    (5, str),
    ("yes", bool),
    ([1], float),
    ({"x": "1"}, dict[str, int]),
    (["a"], list[int]),
])
def test_decoding_refuses_what_the_annotation_cannot_be(value: Any, type_: Any) -> None:
    """A value that is not of the annotated type is refused (ValueError/TypeError), never
    handed on as it is: ``wait`` would return it typed as something it is not, and a handler
    would get it as an argument of another type."""
    with pytest.raises((ValueError, TypeError)):
        JSONCodec().decode(value, type_)


def test_plain_values_of_the_right_type_decode_as_they_are() -> None:
    codec = JSONCodec()
    assert codec.decode(True, int) is True, "a bool is an int, as Python says"
    assert codec.decode(3, float) == 3.0 and type(codec.decode(3, float)) is float
    assert codec.decode(10**30, int) == 10**30
    assert codec.decode("x", int | str) == "x" and codec.decode(5, str | int) == 5
    assert codec.decode(5, UUID | int) == 5, "a refused arm lets the next one try"
    assert codec.decode({"a": 1}, UUID | dict[str, int]) == {"a": 1}
    aware = codec.decode("2026-01-02T03:04:05+02:00", datetime)
    assert aware.utcoffset() == timedelta(hours=2)


def test_a_poison_payload_is_dead_lettered_once_with_a_clear_reason(make_app: MakeApp) -> None:
    """Payloads a foreign producer wrote straight into the store (not JSON; JSON that is not
    ``[args, kwargs]``; a value the app's codec refuses with an error of its own class): each
    is one clear error, the job dead-lettered at its first attempt with reason
    ``bad_arguments``, the worker unharmed, and the job still readable."""
    from tether.stores import NewJob

    class Picky(JSONCodec):
        def decode(self, value: Any, type_: Any) -> Any:
            if type_ is Point and value.get("x") == 1:
                raise RuntimeError("this codec's own refusal")
            return super().decode(value, type_)

    app = make_app(codec=Picky())
    ran: list[object] = []

    @app.task(name="poison.target", max_attempts=5)
    def target(p: Point) -> None:
        ran.append(p)

    payloads = ["not json", '{"args": [1]}', '[[1], {}, "meta"]', '[[{"x": 1, "y": 2}], {}]']
    ids = app.enqueue_jobs([NewJob("poison.target", payload=p) for p in payloads])
    with running(app, concurrency=1):
        jobs = finished(app, *ids)
        good = target.enqueue(Point(3, 4))  # the worker still runs jobs afterwards
        wait_until(lambda: ran != [], 30, "a good job after the poison")
    assert app.get_job(good).status == "done" and ran == [Point(3, 4)]
    for job in jobs:
        assert (job.status, job.failure_reason, job.attempt) == ("failed", "bad_arguments", 1), \
            job
        assert "poison.target" in (job.last_error or ""), job.last_error
        assert len(job.errors) == 1
    assert "this codec's own refusal" in (jobs[3].last_error or "")


def test_a_handler_annotated_with_int_keys_gets_int_keys(make_app: MakeApp) -> None:
    """JSON writes ``{1: ...}`` as ``{"1": ...}``; the worker reads the keys back by the
    annotation, also when every parameter is otherwise plain JSON (the fast path)."""
    app = make_app()

    @app.task
    def count(seen: dict[int, str]) -> dict[int, int]:
        assert all(type(k) is int for k in seen), seen
        return {k * 10: len(v) for k, v in seen.items()}

    job_id = count.enqueue({1: "a", 2: "bb"})
    with running(app, concurrency=1):
        assert app.wait(job_id, timeout=30) == {10: 1, 20: 2}


def test_big_ints_and_exact_decimals_survive_every_store(make_app: MakeApp) -> None:
    """Arguments and results are carried as JSON text on every store: a 30-digit int and a
    Decimal come back exactly (no float or Lua-number rounding on the way)."""
    app = make_app()

    @app.task
    def grow(n: int, d: Decimal) -> list[Any]:
        return [n + 1, d * 3]

    job_id = grow.enqueue(10**30, Decimal("0.1"))
    with running(app, concurrency=1):
        assert app.wait(job_id, timeout=30) == [10**30 + 1, "0.3"]
    assert app.get_job(job_id).args == [10**30, Decimal("0.1")]


def test_the_kept_c_encoder_writes_and_refuses_as_the_standard_one() -> None:
    """Issue #23: the default codec keeps one C encoder (JSONCodec.dumps) instead of the one
    JSONEncoder.encode builds per call; it writes what a fresh JSONEncoder writes and refuses
    the same way."""
    from tether._codec import DEFAULT_CODEC, JSONCodec, to_text

    plain = JSONCodec()
    plain._fast = None  # the standard library's encoder, built per call

    def one(value: Any) -> str:
        return to_text(plain, value, "arguments of t")

    assert DEFAULT_CODEC._fast is not None  # type: ignore[attr-defined]
    values = [[[], {}], [["é 漢字 🎉", 1.5, None, True], {"k": [1, {"a": "\n\""}]}],
              [[datetime(2024, 1, 2, tzinfo=UTC), Decimal("1.10"), UUID(int=5), (1, 2)],
               {}]]
    for value in values:
        assert one(value) == to_text(DEFAULT_CODEC, value, "arguments of t")
    for bad in ([[object()], {}], [[float("nan")], {}], [["\ud800"], {}]):
        with pytest.raises(TypeError) as batch:
            one(bad)
        with pytest.raises(TypeError) as single:
            to_text(DEFAULT_CODEC, bad, "arguments of t")
        assert str(batch.value) == str(single.value)
