"""The public API refuses bad input clearly and loses nothing."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

import tether
from tether._errors import ConfigError
from tether._payload import decode_call


def app_at(tmp_path: Path, **options: object) -> tether.App:
    return tether.App(f"sqlite:///{tmp_path / 'api.db'}", **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"lease_ttl": 3, "heartbeat_interval": 3}, "heartbeat_interval"),
        ({"lease_ttl": 0}, "lease_ttl must be > 0"),
        ({"lease_ttl": -1}, "lease_ttl must be > 0"),
        ({"stall_grace": -1}, "stall_grace must be >= 0"),
        ({"lease_tll": 3}, "unknown option(s) lease_tll"),
        ({"lease_ttl": "30"}, "finite number"),
        ({"claim_batch": 0}, "claim_batch"),
        ({"lease_ttl": 10, "leader_ttl": 10}, "leader_ttl"),
    ],
)
def test_bad_settings_raise_config_error(tmp_path: Path, options: dict[str, object],
                                         message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        app_at(tmp_path, **options)


def test_defaults_and_bound(tmp_path: Path) -> None:
    app = app_at(tmp_path)
    s = app.runtime.settings
    assert s.lease_ttl == 30 and s.heartbeat_every == 10
    assert s.recovery_bound == 32
    assert s.reap_every <= s.lease_ttl
    assert s.leader_lease + s.leader_retry_every <= s.lease_ttl


def test_non_json_payload_refused_and_nothing_enqueued(tmp_path: Path) -> None:
    app = app_at(tmp_path)

    @app.task
    def f(x: object) -> None: ...

    with pytest.raises(TypeError, match="JSON-serializable"):
        f.enqueue(object())
    with pytest.raises(TypeError, match="JSON-serializable"):
        f.enqueue(float("nan"))
    with pytest.raises(TypeError, match="JSON-serializable"):
        f.enqueue_many([((1,), {}), ((b"bytes",), {})])
    assert app.store.list_jobs() == []
    app.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"delay": -1}, "delay"),
        ({"delay": 1, "run_at": 5.0}, "not both"),
        ({"run_at": dt.datetime(2030, 1, 1)}, "timezone-aware"),
        ({"priority": 1.5}, "priority"),
        ({"unique_key": ""}, "unique_key"),
        ({"queue": ""}, "queue"),
    ],
)
def test_bad_enqueue_options(tmp_path: Path, options: dict[str, object], message: str) -> None:
    app = app_at(tmp_path)

    @app.task
    def f() -> None: ...

    with pytest.raises(ValueError, match=message):
        f.enqueue(**options)
    assert app.store.list_jobs() == []
    app.close()


def test_bad_task_options(tmp_path: Path) -> None:
    app = app_at(tmp_path)
    with pytest.raises(ConfigError, match="max_attempts"):
        app.task(max_attempts=0)(lambda: None)
    with pytest.raises(ConfigError, match="timeout"):
        app.task(timeout=-1)(lambda: None)
    app.task(name="x")(lambda: None)
    with pytest.raises(ConfigError, match="already registered"):
        app.task(name="x")(lambda: None)


def test_unknown_event_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown event"):
        app_at(tmp_path).on("finished", print)


def test_current_job_outside_a_handler() -> None:
    with pytest.raises(tether.TetherError, match="outside"):
        tether.current_job()


def test_enqueue_options_reach_the_store(tmp_path: Path) -> None:
    app = app_at(tmp_path)

    @app.task(queue="mail", max_attempts=7, max_stalls=2, priority=3)
    def send(to: str) -> None: ...

    when = dt.datetime(2031, 5, 1, tzinfo=dt.UTC)
    job = app.get_job(send.enqueue("a@b", run_at=when, unique_key="k1"))
    assert (job.queue, job.max_attempts, job.max_stalls, job.priority) == ("mail", 7, 2, 3)
    assert job.run_at == when and job.run_at.tzinfo is not None
    assert job.args == ["a@b"] and job.kwargs == {}
    record = app.store.get_job(job.id)
    assert record is not None and decode_call(record.payload) == (["a@b"], {})
    assert send.enqueue("a@b", unique_key="k1") == job.id
    with pytest.raises(tether.JobNotFound):
        app.get_job(10_000)
    app.close()


def test_public_names() -> None:
    for name in tether.__all__:
        assert hasattr(tether, name), name
