"""Batches (issue #23): a handler thread runs several short jobs per take.

What must hold whatever the batch: the jobs of a batch not started yet never wait behind a
slow handler of their batch (the fetcher takes them back after ``LAG``), the outcomes a thread
holds are settled, each job's timeout counts from its own start, and each entry leaves a hand
exactly once (to the thread that starts it or to a hand-back).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import tether
from tests.worker.helpers import running, wait_until
from tests.worker.test_claim_ahead import _entry
from tether._worker.registry import LAG, Hand, Registry, Stage
from tether._worker.threads.claimahead import BATCH_MOST, ClaimAhead


def test_a_batch_is_taken_in_one_take_and_holds_one_slot() -> None:
    reg = Registry(2)
    entries = [_entry(i + 1) for i in range(5)]
    reg.ahead = 10
    reg.queue(entries, wake=0)
    hand = Hand()
    first = reg.take_batch(hand, [], 4, first=True)
    assert first is entries[0] and first.stage is Stage.RUNNING
    assert list(hand.rest) == entries[1:4]
    assert all(e.stage is Stage.WAITING for e in hand.rest)
    assert reg.queued() == 4  # the hand's three and the backlog's one: none has a slot
    assert reg.free() == 2 - 1 - 4 + 10  # the batch holds one slot; its rest counts as queued


def test_the_fetcher_takes_back_what_a_slow_handler_holds_up() -> None:
    reg = Registry(2)
    entries = [_entry(i + 1) for i in range(4)]
    reg.queue(entries, wake=0)
    hand = Hand()
    assert reg.take_batch(hand, [], 4, first=True) is entries[0]
    reg.nudge(LAG)  # the running handler has not run LAG yet: the batch stays
    assert len(hand.rest) == 3
    hand.started -= 2 * LAG  # ... now it has
    reg.nudge(LAG)
    assert not hand.rest
    other = Hand()
    assert reg.take_batch(other, [], 1, first=True) is entries[1]  # oldest first, elsewhere
    assert reg.unqueue() == entries[2:]


def test_a_hand_back_takes_from_hands_and_each_entry_leaves_once() -> None:
    reg = Registry(1)
    entries = [_entry(i + 1) for i in range(3)]
    reg.queue(entries, wake=0)
    hand = Hand()
    reg.take_batch(hand, [], 3, first=True)
    out = reg.unqueue()  # a forced stop
    assert out == entries[1:] and not hand.rest
    assert all(e.stage is Stage.RETURNED for e in out)
    assert reg.queued() == 0


def test_a_batch_forms_only_for_short_handlers() -> None:
    ahead = ClaimAhead(Registry(2), 100, None, lambda: None)  # type: ignore[arg-type]
    assert ahead.batch() == 1  # nothing measured yet
    ahead.mean = 1.0
    assert ahead.batch() == 1
    ahead.mean = 1e-6
    assert ahead.batch() == BATCH_MOST


@pytest.fixture
def batches_of_8(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ClaimAhead, "batch", lambda self: 8)


@pytest.mark.usefixtures("batches_of_8")
def test_a_slow_handler_holds_back_neither_the_next_jobs_nor_the_outcomes(
        make_app: Any) -> None:
    app: tether.App = make_app()
    release = threading.Event()
    slow_started = threading.Event()

    @app.task(name="work")
    def work(slow: bool) -> None:
        if slow:
            slow_started.set()
            release.wait(30)

    warm = work.enqueue_many([((False,), {})] * 40)
    with running(app, concurrency=2, maintenance=False):
        wait_until(lambda: all(app.get_job(i).status == "done" for i in warm), 30, "warm-up")
        ids = work.enqueue_many([((s,), {}) for s in [False] * 3 + [True] + [False] * 6])
        quick = ids[:3] + ids[4:]
        try:
            assert slow_started.wait(10)
            # LAG, the fetcher's next look and the completer's write: well under a second.
            wait_until(lambda: all(app.get_job(i).status == "done" for i in quick), 3,
                       "the quick jobs while the slow one still runs")
            assert app.get_job(ids[3]).status == "running"
        finally:
            release.set()
        wait_until(lambda: app.get_job(ids[3]).status == "done", 10, "the slow one")


@pytest.mark.usefixtures("batches_of_8")
def test_each_job_of_a_batch_times_out_from_its_own_start(make_app: Any) -> None:
    app: tether.App = make_app()
    starts: dict[int, float] = {}

    @app.task(name="timed", timeout=0.5, max_attempts=1)
    def timed(i: int, seconds: float) -> None:
        starts[i] = time.monotonic()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not tether.current_job().cancelled:
            time.sleep(0.005)

    warm = timed.enqueue_many([((-1 - i, 0.0), {}) for i in range(40)])
    with running(app, concurrency=1, maintenance=False):
        wait_until(lambda: all(app.get_job(i).status == "done" for i in warm), 30, "warm-up")
        # Four jobs of 0.3 s in a row: 1.2 s in all, each under its own 0.5 s timeout.
        ids = timed.enqueue_many([((i, 0.3), {}) for i in range(4)] + [((9, 5.0), {})])
        wait_until(lambda: all(app.get_job(i).status in ("done", "failed") for i in ids), 20,
                   "the batch")
        jobs = [app.get_job(i) for i in ids]
    assert [j.status for j in jobs] == ["done"] * 4 + ["failed"], jobs
    assert jobs[-1].failure_reason == "timeout"
    assert all(j.last_error is None for j in jobs[:4])


@pytest.mark.usefixtures("batches_of_8")
def test_async_jobs_in_a_batch_take_its_slot_and_every_slot_comes_back(make_app: Any) -> None:
    app: tether.App = make_app()

    @app.task(name="plain")
    def plain() -> None:
        return None

    @app.task(name="coro")
    async def coro() -> None:
        return None

    ids = plain.enqueue_many([((), {})] * 30)
    for _ in range(5):  # async jobs among sync ones: a batch meets them midway
        ids += coro.enqueue_many([((), {})] * 3) + plain.enqueue_many([((), {})] * 20)
    with running(app, concurrency=3, maintenance=False) as worker:
        wait_until(lambda: all(app.get_job(i).status == "done" for i in ids), 60, "every job")
        wait_until(lambda: len(worker.registry) == 0, 10, "the registry to empty")
        assert worker.registry.queued() == 0
        assert worker.registry._busy == 0  # every slot returned
