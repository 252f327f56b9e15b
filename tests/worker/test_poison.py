"""Poison text and bad results never kill a worker or block a queue (issue #8, item A).

A real worker (in-process) against every store. Store faults that a real server cannot be
made to produce on demand (a driver bug, a non-transient refusal of one outcome) are injected
by wrapping one method of the real store; everything else goes to the real server.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import tether
from tests.worker.helpers import running, status, wait_until
from tether._errors import StoreError, StoreGone, StoreUnavailable
from tether._events import Event
from tether._worker.worker import Worker
from tether.stores import NewJob

pytestmark = pytest.mark.timeout(60)
MakeApp = Callable[..., tether.App]
FAST = tether.Backoff(base=0.01, factor=1.0, max=0.01, jitter=0.0)


def test_poison_error_text_is_stored_cleaned_and_logged_the_same(make_app: MakeApp) -> None:
    app = make_app()
    failed: list[Event] = []
    app.on("failed", failed.append)

    @app.task(max_attempts=1)
    def poison() -> None:
        raise ValueError("bad \x00 name \udcff.txt \U0001f600")

    job_id = poison.enqueue()
    with running(app, concurrency=1) as worker:
        wait_until(lambda: status(app, job_id) == "failed", what="failed")
        assert worker.shutdown.fatal is None
    job = app.get_job(job_id)
    stored = job.last_error or ""
    assert "\x00" not in stored and "\\x00" in stored and "\\udcff" in stored, stored
    assert "\U0001f600" in stored  # valid text is kept as it is
    assert [e.detail["error"] for e in failed] == [stored]  # the log and the store agree
    assert job.error_history[0]["error"] == stored


def test_a_result_that_cannot_be_stored_fails_the_job_without_retry(make_app: MakeApp) -> None:
    app = make_app()
    runs: list[int] = []

    @app.task(max_attempts=3, retry=FAST)
    def listing() -> list[str]:
        runs.append(tether.current_job().attempt)
        return ["caf\udce9.txt"]  # os.listdir of a non-UTF-8 file name

    job_id = listing.enqueue()
    with running(app, concurrency=1):
        wait_until(lambda: status(app, job_id) == "failed", what="failed")
    job = app.get_job(job_id)
    assert runs == [1]
    assert (job.failure_reason, job.attempt, job.failures) == ("bad_result", 1, 1), job
    assert "result of" in (job.last_error or "") and "surrogate" in (job.last_error or "")


def test_arguments_that_do_not_bind_fail_the_job_at_once(make_app: MakeApp) -> None:
    app = make_app()
    runs: list[int] = []

    @app.task(max_attempts=3, retry=FAST)
    def add(a: int, b: int) -> int:
        runs.append(1)
        return a + b

    @app.task(max_attempts=3, retry=FAST)
    async def aadd(a: int, b: int) -> int:
        runs.append(1)
        return a + b

    # Producers that do not know the tasks (an old release, another service): the app that
    # registers them refuses these calls at enqueue (tests/api/test_tasks.py).
    old = make_app()
    missing = old.enqueue(add.name, 1)  # b is missing (a renamed parameter)
    extra = old.enqueue(aadd.name, 1, 2, c=3)
    garbage = app.store.enqueue([NewJob(add.name, payload='{"not": "args"}', max_attempts=3)])[0]
    with running(app, concurrency=2):
        wait_until(lambda: all(status(app, i) == "failed" for i in (missing, extra, garbage)),
                   what="all failed")
    assert runs == []
    for job_id in (missing, extra, garbage):
        job = app.get_job(job_id)
        assert (job.failure_reason, job.attempt) == ("bad_arguments", 1), job
    assert "b" in (app.get_job(missing).last_error or "")


def test_a_checkpoint_json_cannot_carry_fails_the_attempt_clearly(make_app: MakeApp) -> None:
    app = make_app()

    @app.task(max_attempts=1)
    def saver() -> None:
        tether.current_job().save_checkpoint({"file": "x\udcff"})

    job_id = saver.enqueue()
    with running(app, concurrency=1) as worker:
        wait_until(lambda: status(app, job_id) == "failed", what="failed")
        assert worker.shutdown.fatal is None
    error = app.get_job(job_id).last_error or ""
    assert "TypeError" in error and "checkpoint" in error and "surrogate" in error, error


# -- side loops survive any exception from one store call -----------------------------------

class Faults:
    """Make a method of a real store raise ``exc`` for its next ``times`` calls."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    def inject(self, target: Any, method: str, exc: BaseException, times: int = 1,
               when: Callable[..., bool] = lambda *a, **kw: True) -> None:
        real = getattr(target, method)
        left = [times]

        def faulty(*args: Any, **kwargs: Any) -> Any:
            self.calls[method] = self.calls.get(method, 0) + 1
            if left[0] > 0 and when(*args, **kwargs):
                left[0] -= 1
                raise exc
            return real(*args, **kwargs)

        setattr(target, method, faulty)


@contextmanager
def worker_thread(worker: Worker) -> Iterator[list[int]]:
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run(install_signals=False)),
                              daemon=True)
    thread.start()
    try:
        yield codes
    finally:
        worker.stop(force=True)
        thread.join(15)
        assert not thread.is_alive(), "worker did not stop"


@pytest.mark.slow
def test_every_side_loop_survives_any_store_exception(make_app: MakeApp) -> None:
    app = make_app(lease_ttl=1.5, reaper_interval=0.2, election=False)

    @app.task(retry=FAST)
    def ok(i: int) -> int:
        return i

    worker: Worker = app.worker(concurrency=2)
    faults = Faults()
    faults.inject(worker.store, "claim", RuntimeError("driver bug in claim"), times=2)
    faults.inject(worker.store, "wait_for_jobs", StoreUnavailable("listen connection lost"))
    faults.inject(worker.store, "wait_for_jobs", KeyError("driver bug in wait"))
    faults.inject(worker.heartbeater.store, "heartbeat", RuntimeError("driver bug in heartbeat"))
    faults.inject(worker.store, "finish", RuntimeError("driver bug in finish"))
    assert worker.maintainer is not None
    faults.inject(worker.maintainer.store, "reap_expired", RuntimeError("driver bug in reap"))
    faults.inject(worker.maintainer.store, "next_lease_expiry", ZeroDivisionError("bug"))
    with worker_thread(worker) as codes:
        wait_until(lambda: faults.calls.get("wait_for_jobs", 0) >= 3
                   and faults.calls.get("reap_expired", 0) >= 2
                   and faults.calls.get("heartbeat", 0) >= 2, what="faults to be hit")
        ids = ok.enqueue_many([((i,), {}) for i in range(5)])
        wait_until(lambda: all(status(app, i) == "done" for i in ids), what="jobs done")
        assert worker.shutdown.fatal is None and not codes, "the worker stopped"
    assert codes == [0]


def test_an_outcome_the_store_refuses_is_stored_as_a_clean_error(make_app: MakeApp) -> None:
    app = make_app(lease_ttl=1.5)
    release = threading.Event()

    @app.task(max_attempts=3, retry=FAST)
    def produce(text: str) -> str:
        release.wait(10)
        return text

    worker: Worker = app.worker(concurrency=4)
    faults = Faults()
    # A non-transient refusal (a value too long for the store, say) of any batch holding the
    # poisonous result: the other outcomes of that batch must still land.
    faults.inject(
        worker.store, "finish", StoreError("value too long for type character varying(10)"),
        times=1000, when=lambda outcomes, **kw: any(o.result and "POISON" in o.result
                                                     for o in outcomes))
    ids = [produce.enqueue(t) for t in ("fine", "POISON", "also fine")]
    with worker_thread(worker) as codes:
        wait_until(lambda: all(status(app, i) == "running" for i in ids), what="all running")
        release.set()
        wait_until(lambda: [status(app, i) for i in ids] == ["done", "failed", "done"],
                   what="good outcomes stored, the bad one as a clean error")
        assert not codes
    bad = app.get_job(ids[1])
    assert (bad.failure_reason, bad.attempt) == ("bad_result", 1), bad
    assert "could not store" in (bad.last_error or "") and "value too long" in (
        bad.last_error or "")


def test_store_gone_stops_the_worker_with_one_clear_line(
    make_app: MakeApp, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app()
    worker: Worker = app.worker(concurrency=1)
    Faults().inject(worker.store, "claim", StoreGone("the SQLite file was deleted"), times=100)
    with caplog.at_level(logging.INFO), worker_thread(worker) as codes:
        wait_until(lambda: codes, timeout=10, what="the worker to stop")
    assert codes == [1]
    lines = [r for r in caplog.records if "the SQLite file was deleted" in r.getMessage()]
    assert lines and lines[0].levelno == logging.ERROR, [r.getMessage() for r in lines]
    assert all(r.exc_info is None for r in lines)  # one line, not a traceback
