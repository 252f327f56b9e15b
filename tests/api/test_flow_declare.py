"""Declaring flow control (issue #19): task and queue limits, limit keys, per-queue slots and
Snooze's checks. Every bad declaration is one ConfigError when made; a bad key value is one
TypeError at enqueue. What the store does with them is tests/contract/test_flow.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import tether
from tether._flow import parse_queues, parse_rate, slots_for
from tether.stores import FlowLimit


@pytest.fixture
def app() -> Any:
    made = tether.App("memory://")
    yield made
    made.close()


@pytest.mark.parametrize("value", [0, -1, True, "3", 2.5])
def test_concurrency_must_be_a_positive_int(app: tether.App, value: Any) -> None:
    with pytest.raises(tether.ConfigError, match="concurrency must be a positive int"):
        app.task(name="t", concurrency=value)(lambda: None)


@pytest.mark.parametrize("value", ["abc", "0/m", "-1/m", "10/x", "10", "10/0s", 10, "/m"])
def test_a_bad_rate_is_refused(app: tether.App, value: Any) -> None:
    with pytest.raises(tether.ConfigError, match="rate"):
        app.task(name="t", rate=value)(lambda: None)


@pytest.mark.parametrize(("text", "count", "per"), [
    ("10/m", 10, 60.0), ("5/s", 5, 1.0), ("100/h", 100, 3600.0), ("10/30s", 10, 30.0),
    ("3 / 5m", 3, 300.0), ("1/minute", 1, 60.0), ("2/hours", 2, 3600.0), ("7/d", 7, 86400.0),
])
def test_rates(text: str, count: int, per: float) -> None:
    rate = parse_rate(text, "t")
    assert (rate.count, rate.per) == (count, per)


def test_limit_key_must_name_a_parameter(app: tether.App) -> None:
    def send(customer: str, *rest: Any, body: str = "", **more: Any) -> None: ...

    with pytest.raises(tether.ConfigError, match="'client' is not a parameter"):
        app.task(name="a", limit_key="client")(send)
    with pytest.raises(tether.ConfigError, match="'rest' is not a parameter"):
        app.task(name="b", limit_key="rest")(send)
    with pytest.raises(tether.ConfigError, match="'more' is not a parameter"):
        app.task(name="c", limit_key="more")(send)
    assert app.task(name="d", limit_key="body")(send).options.limit_key == "body"


def test_a_task_limit_becomes_a_flow_limit(app: tether.App) -> None:
    @app.task(name="send", concurrency=3, rate="100/m", limit_key="customer")
    def send(customer: str) -> None: ...

    assert send.options.flow == FlowLimit("task", "send", concurrency=3, rate=100, per=60.0,
                                          per_key=True)

    @app.task(name="plain")
    def plain() -> None: ...

    assert plain.options.flow is None
    assert app.runtime.registry.flow() == [send.options.flow]


def test_queue_limits(app: tether.App) -> None:
    limit = app.queue("emails", concurrency=5, rate="100/m")
    assert limit == FlowLimit("queue", "emails", concurrency=5, rate=100, per=60.0)
    assert app.queue("emails", concurrency=5, rate="100/m") == limit, "the same again is fine"
    with pytest.raises(tether.ConfigError, match="already declared with other limits"):
        app.queue("emails", concurrency=6)
    with pytest.raises(tether.ConfigError, match="give concurrency= or rate="):
        app.queue("images")
    with pytest.raises(tether.ConfigError, match="concurrency"):
        app.queue("images", concurrency=0)
    assert app.runtime.registry.flow() == [limit]


def test_the_key_is_read_from_the_call(app: tether.App) -> None:
    @app.task(name="send", concurrency=2, limit_key="customer")
    def send(body: str, customer: str | int = "anon", *, urgent: bool = False) -> None: ...

    assert send.new_job(("hi", "acme"), {}).limit_key == "acme"
    assert send.new_job(("hi",), {"customer": "globex"}).limit_key == "globex"
    assert send.new_job(("hi",), {}).limit_key == "anon", "a default is the key too"
    assert send.new_job(("hi", 42), {}).limit_key == "42", "an int is its decimal text"
    assert send.new_job(("hi", "acme"), {}, limit_key="other").limit_key == "other"
    with pytest.raises(TypeError, match="send: the limit key argument 'customer' must be a str"):
        send.new_job(("hi", 4.5), {})
    with pytest.raises(TypeError, match="must be a str or an int, got bool"):
        send.new_job(("hi", True), {})


def test_enqueue_stores_the_key(app: tether.App) -> None:
    @app.task(name="send", limit_key="customer")
    def send(customer: str) -> None: ...

    @app.task(name="free")
    def free() -> None: ...

    assert app.get_job(send.enqueue("acme")).limit_key == "acme"
    assert app.get_job(send.enqueue_with(("acme",), limit_key=7)).limit_key == "7"
    assert app.get_job(free.enqueue_with(limit_key="k")).limit_key == "k"
    assert app.get_job(free.enqueue()).limit_key is None
    assert app.get_job(free.options(limit_key="z").enqueue()).limit_key == "z"
    with pytest.raises(TypeError, match="limit key"):
        send.enqueue(["not", "a", "key"])  # type: ignore[arg-type]


def test_queue_slots_parse() -> None:
    assert parse_queues(["images=2", "default=8"]) == (["images", "default"],
                                                        {"images": 2, "default": 8})
    assert parse_queues({"images": 2, "default": None}) == (["images", "default"],
                                                            {"images": 2})
    assert parse_queues(None) == (None, {})
    for bad in (["images=0"], ["images=x"], ["a", "a=2"], {"a": -1}):
        with pytest.raises(tether.ConfigError):
            parse_queues(bad)


def test_worker_concurrency_from_queue_slots() -> None:
    assert slots_for(None, ["images", "default"], {"images": 2, "default": 8}) == 10
    assert slots_for(None, ["images", "default"], {"images": 2}) == 10
    assert slots_for(None, ["images", "default"], {"images": 12}) == 13
    assert slots_for(20, ["images", "default"], {"images": 2, "default": 8}) == 20
    assert slots_for(None, ["a"], {}) == 10
    with pytest.raises(tether.ConfigError, match="do not fit in concurrency 4"):
        slots_for(4, ["images", "default"], {"images": 2, "default": 8})
    with pytest.raises(tether.ConfigError, match="default would get no slot"):
        slots_for(2, ["images", "default"], {"images": 2})


def test_app_worker_takes_queue_slots(app: tether.App) -> None:
    worker = app.worker(queues=["images=2", "default=8"], maintenance=False)
    try:
        assert worker.concurrency == 10
        assert worker.queues == ["images", "default"]
        assert worker.queue_slots == {"images": 2, "default": 8}
    finally:
        worker._close()


def test_snooze_checks_its_delay() -> None:
    assert tether.Snooze(30).seconds == 30.0
    assert tether.Snooze(timedelta(minutes=2), "rate limited").seconds == 120.0
    assert str(tether.Snooze(1.5, "busy")) == "snoozed for 1.5 s: busy"
    for bad in (0, -1, float("inf"), True, "5", 400 * 86400):
        with pytest.raises(ValueError, match="Snooze"):
            tether.Snooze(bad)
