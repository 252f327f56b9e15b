"""The job view is the same on every store: one scenario (typed arguments, a failed attempt,
progress, a checkpoint, a result; a dead-lettered job; a cancelled one) runs on SQLite,
PostgreSQL, Redis and memory, and the views must be equal field for field once what differs
by nature (ids, instants, worker names) is replaced by its type."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import tether
from tests.servers import STORE_KINDS, isolated_url
from tests.worker.helpers import running, wait_until

pytestmark = pytest.mark.timeout(120)
FAST = tether.Backoff(base=0.01, factor=1.0, max=0.01, jitter=0.0)
AT = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _scenario(url: str) -> list[tether.Job]:
    """Three jobs' views, as read after each ended, on the store at ``url``."""
    app = tether.App(url, lease_ttl=1.5, poll_interval=0.05)
    calls: list[int] = []

    @app.task(name="views.total", max_attempts=3, retry=FAST, queue="views", priority=-2)
    def total(prices: list[Decimal], *, at: datetime) -> dict[str, Any]:
        calls.append(1)
        job = tether.current_job()
        job.set_progress({"step": len(calls)})
        job.save_checkpoint({"seen": len(calls)})
        if len(calls) == 1:
            raise RuntimeError("first try fails")
        return {"sum": str(sum(prices, Decimal(0))), "at": at.isoformat()}

    @app.task(name="views.broken", max_attempts=1)
    def broken() -> None:
        raise ValueError("always")

    try:
        ids = [total.enqueue([Decimal("1.10"), Decimal("2.20")], at=AT),
               broken.enqueue(),
               total.options(delay=3600, unique_key="later").enqueue([], at=AT)]
        app.cancel(ids[2])
        with running(app, concurrency=1):
            wait_until(lambda: all(app.get_job(i).finished for i in ids), 60, "the jobs")
        return [app.get_job(i) for i in ids]
    finally:
        app.close()


def _normal(job: tether.Job) -> dict[str, Any]:
    """The view with what differs by nature between stores replaced by its type."""
    out = dataclasses.asdict(job)
    out["id"] = int
    assert len(job.uid) == 32 and int(job.uid, 16) >= 0, job.uid  # 128 random bits, in hex
    out["uid"] = str
    for name in ("run_at", "created_at", "started_at", "finished_at", "lease_until"):
        value = out[name]
        assert value is None or (isinstance(value, datetime) and value.tzinfo is not None), \
            (name, value)
        out[name] = None if value is None else datetime
    out["locked_by"] = None if job.locked_by is None else str
    out["errors"] = [{**e, "at": type(e["at"]), "owner": type(e.get("owner")),
                      "error": e["error"].splitlines()[0]} for e in job.errors]
    out["last_error"] = None if job.last_error is None else job.last_error.splitlines()[0]
    return out


@pytest.fixture
def urls(tmp_path: Path) -> Iterator[dict[str, str]]:
    with (isolated_url("sqlite", tmp_path) as sqlite, isolated_url("memory", tmp_path) as mem,
          isolated_url("postgres", tmp_path) as pg, isolated_url("redis", tmp_path) as rd):
        yield {"sqlite": sqlite, "memory": mem, "postgres": pg, "redis": rd}


def test_the_view_is_the_same_on_every_store(urls: dict[str, str]) -> None:
    assert set(urls) == {*STORE_KINDS, "memory"}
    views = {kind: [_normal(j) for j in _scenario(url)] for kind, url in urls.items()}
    reference = views.pop("memory")
    done, failed, cancelled = reference
    assert done["status"] == "done" and done["result"] == {"sum": "3.30",
                                                           "at": AT.isoformat()}
    assert done["args"] == [[Decimal("1.10"), Decimal("2.20")]] and done["kwargs"] == {"at": AT}
    assert failed["status"] == "failed" and failed["failure_reason"] == "error"
    assert cancelled["status"] == "cancelled" and cancelled["unique_key"] == "later"
    for kind, found in views.items():
        for ref, view in zip(reference, found, strict=True):
            diff = {k: (ref[k], view[k]) for k in ref if ref[k] != view[k]}
            assert diff == {}, f"{kind} differs from memory: {diff}"
