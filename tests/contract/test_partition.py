"""A silent partition between a producer and its store (issue 18, H): packets dropped, no FIN,
no RST. The fault proxy black-holes the network (``blackhole`` in tests/faults.py) on the
connections the producer already holds and on any new one.

Every producer call raises StoreUnavailable (a wait: TimeoutError at its timeout) within the
store's documented deadline, instead of waiting until TCP gives up: 19-27 s were measured on a
real partition, and on loopback TCP never gives up (the proxy's kernel acknowledges every
byte), so only tether's own deadline can end the call. An enqueue that timed out is retried
after the partition heals with its request id and makes one job, although its first request,
held by the partition, reached the server too.

These tests assert a documented bound in wall-clock seconds (docs/guarantees.md, "A silent
partition"): ``deadline`` plus the ~1 s in which ``App.enqueue`` retries, plus a slack for a
loaded machine that stays far below the failures they catch. SQLite and the memory store have
no network (``faulty`` makes them strict xfails).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

import tether
from tests.contract.helpers import Faulty, transient
from tether._errors import StoreUnavailable
from tether.stores import NewJob, Outcome, Store, open_store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

#: The default deadline (docs/guarantees.md): the longest one store call waits for a server
#: that does not answer.
DEFAULT_DEADLINE = 5.0
#: A shorter one, set in the URL, for the tests of each call (they would take long otherwise).
SHORT = 2.0
#: ``App.enqueue`` retries a failed attempt only within its first second.
RETRY_WINDOW = 1.0
#: Slack for a loaded test machine (2 cores, several suites side by side).
SLACK = 3.0


def _bound(deadline: float) -> float:
    return deadline + RETRY_WINDOW + SLACK


def with_query(url: str, **params: object) -> str:
    """``url`` with ``params`` added to its query string."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query += [(k, str(v)) for k, v in params.items()]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _timed(call: Callable[[], object], bound: float) -> tuple[BaseException | None, float]:
    """Run ``call`` on a thread of its own (a call that hangs fails the test, instead of
    hanging it) and return what it raised and how long it took."""
    out: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            call()
            out["error"] = None
        except BaseException as exc:  # reported by the caller's assertions
            out["error"] = exc
        out["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(bound + 30)
    assert not thread.is_alive(), (
        f"the call still waits {bound + 30:.0f} s into the partition (bound {bound:.0f} s)")
    return out["error"], out["elapsed"]


def assert_unavailable_within(call: Callable[[], object], deadline: float,
                              expected: type[BaseException] = StoreUnavailable) -> float:
    bound = _bound(deadline)
    error, elapsed = _timed(call, bound)
    assert isinstance(error, expected), f"expected {expected.__name__}, got {error!r}"
    assert elapsed <= bound, (
        f"{expected.__name__} after {elapsed:.1f} s; the documented bound is "
        f"{deadline:g} s + {RETRY_WINDOW:g} s of retries (+{SLACK:g} s slack)")
    return elapsed


def _app(faulty: Faulty, **params: object) -> tether.App:
    app = tether.App(with_query(faulty.url, **params) if params else faulty.url)

    @app.task(name="partition.mark")
    def mark(tag: str) -> None:
        return None

    return app


def _mark(app: tether.App) -> Any:
    task = app.find_task("partition.mark")
    assert task is not None
    return task


# -- App.enqueue at the default deadline ----------------------------------------------------
@pytest.mark.parametrize("connection", ["open", "new"])
def test_enqueue_raises_within_the_default_deadline(faulty: Faulty, connection: str) -> None:
    """``open``: the app holds a live connection when the partition starts; ``new``: its
    first call (which opens the store) meets the partition."""
    proxy, app = faulty.proxy, _app(faulty)
    try:
        if connection == "open":
            _mark(app).enqueue("warm-up")
        proxy.blackhole()
        assert_unavailable_within(lambda: _mark(app).enqueue("cut-off"), DEFAULT_DEADLINE)
    finally:
        proxy.heal()
        app.close()


@pytest.mark.parametrize("connection", ["open", "new"])
def test_aenqueue_raises_within_the_default_deadline(faulty: Faulty, connection: str) -> None:
    proxy, app = faulty.proxy, _app(faulty)

    async def main() -> None:
        try:
            if connection == "open":
                await _mark(app).aenqueue("warm-up")
            proxy.blackhole()
            started = time.monotonic()
            try:
                await _mark(app).aenqueue("cut-off")
            finally:
                elapsed.append(time.monotonic() - started)
        finally:
            proxy.heal()
            await app.aclose()

    elapsed: list[float] = []
    try:
        error, _ = _timed(lambda: asyncio.run(main()), _bound(DEFAULT_DEADLINE))
        assert isinstance(error, StoreUnavailable), repr(error)
        assert elapsed and elapsed[0] <= _bound(DEFAULT_DEADLINE), (
            f"StoreUnavailable after {elapsed[0]:.1f} s")
    finally:
        proxy.heal()
        app.close()


# -- every producer call, at a deadline set in the URL ----------------------------------------
SYNC_CALLS: dict[str, Callable[[tether.App, int], object]] = {
    "enqueue_many": lambda app, _: _mark(app).enqueue_many([(("a",), {}), (("b",), {})]),
    "get_job": lambda app, job_id: app.get_job(job_id),
    "cancel": lambda app, job_id: app.cancel(job_id),
    "enqueue by name": lambda app, _: app.enqueue("partition.mark", "by-name"),
}


@pytest.mark.parametrize("call", sorted(SYNC_CALLS))
def test_each_call_raises_within_the_url_deadline(faulty: Faulty, call: str) -> None:
    proxy, app = faulty.proxy, _app(faulty, deadline=SHORT)
    try:
        job_id = _mark(app).enqueue("warm-up")
        proxy.blackhole()
        assert_unavailable_within(lambda: SYNC_CALLS[call](app, job_id), SHORT)
    finally:
        proxy.heal()
        app.close()


def test_wait_ends_at_its_timeout(faulty: Faulty) -> None:
    """``wait`` rides out an outage until its timeout; in a partition it must still end
    then (TimeoutError), each read bounded by the deadline."""
    proxy, app = faulty.proxy, _app(faulty, deadline=SHORT)
    try:
        job_id = _mark(app).enqueue("warm-up")
        proxy.blackhole()
        assert_unavailable_within(lambda: app.wait(job_id, timeout=1.0), SHORT + 1.0,
                                  expected=TimeoutError)
    finally:
        proxy.heal()
        app.close()


ASYNC_CALLS: dict[str, Callable[[tether.App, int], Awaitable[object]]] = {
    "aenqueue_many": lambda app, _: _mark(app).aenqueue_many([(("a",), {}), (("b",), {})]),
    "aget_job": lambda app, job_id: app.aget_job(job_id),
    "acancel": lambda app, job_id: app.acancel(job_id),
}


@pytest.mark.parametrize("call", sorted(ASYNC_CALLS))
def test_each_async_call_raises_within_the_url_deadline(faulty: Faulty, call: str) -> None:
    proxy, app = faulty.proxy, _app(faulty, deadline=SHORT)
    elapsed: list[float] = []

    async def main() -> None:
        try:
            job_id = await _mark(app).aenqueue("warm-up")
            proxy.blackhole()
            started = time.monotonic()
            try:
                await ASYNC_CALLS[call](app, job_id)
            finally:
                elapsed.append(time.monotonic() - started)
        finally:
            proxy.heal()
            await app.aclose()

    try:
        error, _ = _timed(lambda: asyncio.run(main()), _bound(SHORT))
        assert isinstance(error, StoreUnavailable), repr(error)
        assert elapsed and elapsed[0] <= _bound(SHORT), f"after {elapsed[0]:.1f} s"
    finally:
        proxy.heal()
        app.close()


def test_await_result_ends_at_its_timeout(faulty: Faulty) -> None:
    proxy, app = faulty.proxy, _app(faulty, deadline=SHORT)

    async def main() -> None:
        try:
            job_id = await _mark(app).aenqueue("warm-up")
            proxy.blackhole()
            await app.await_result(job_id, timeout=1.0)
        finally:
            proxy.heal()
            await app.aclose()

    try:
        assert_unavailable_within(lambda: asyncio.run(main()), SHORT + 1.0,
                                  expected=TimeoutError)
    finally:
        proxy.heal()
        app.close()


# -- the store's own calls, and a retry after the partition heals ---------------------------
def _lossy(faulty: Faulty) -> Store:
    store = open_store(with_query(faulty.url, deadline=SHORT))
    faulty.opened.append(store)
    store.migrate()
    return store


def test_a_timed_out_enqueue_retried_after_the_partition_makes_one_job(
    faulty: Faulty, store: Store
) -> None:
    """The timed-out request was held by the partition, not lost: once it heals the server
    runs it. The caller's retry with the same request id is answered from its record."""
    proxy, lossy = faulty.proxy, _lossy(faulty)
    task, rid = "held-" + uuid.uuid4().hex[:8], uuid.uuid4().hex
    lossy.enqueue([NewJob("warm-up")])
    proxy.blackhole()
    assert_unavailable_within(lambda: lossy.enqueue([NewJob(task)], request_id=rid), SHORT)
    assert not [j for j in store.list_jobs(limit=100) if j.task == task]
    proxy.heal()
    if not faulty.url.startswith("tether://"):
        # gRPC cancels a call at its deadline: the cancellation follows the held request
        # through the healed partition, so a tether server may never run it. Either way the
        # retry below must leave exactly one job.
        _wait_for(lambda: [j for j in store.list_jobs(limit=100) if j.task == task],
                  "the held enqueue to reach the server")
    ids = transient(lambda: lossy.enqueue([NewJob(task)], request_id=rid))
    assert [j.id for j in store.list_jobs(limit=100) if j.task == task] == ids


def test_store_calls_raise_within_the_url_deadline(faulty: Faulty, store: Store) -> None:
    """The store API itself (what the App and the worker stand on): get_job, enqueue and a
    worker's claim, heartbeat and finish each end within the deadline."""
    proxy, lossy = faulty.proxy, _lossy(faulty)
    job_id, _ = lossy.enqueue([NewJob("warm-up", queue="held"), NewJob("waiting")])
    [held] = lossy.claim("w", ["held"], 1, 30)
    proxy.blackhole()
    assert_unavailable_within(lambda: lossy.get_job(job_id), SHORT)
    assert_unavailable_within(lambda: lossy.enqueue([NewJob("t")], request_id="r1"), SHORT)
    assert_unavailable_within(lambda: lossy.claim("w", ["default"], 1, 30), SHORT)
    assert_unavailable_within(lambda: lossy.heartbeat("w", [held.lease], 30), SHORT)
    assert_unavailable_within(
        lambda: lossy.finish([Outcome(held.lease, "done", result="1")]), SHORT)
    proxy.heal()
    assert transient(lambda: lossy.get_job(job_id)) is not None  # and usable again


def _wait_for(cond: Callable[[], object], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)

