"""Claiming ahead of free slots (issue #10): the bound, the backlog, and a real worker's claims.

The head-of-line behaviour (hand-back to an idle worker) is tested with real worker processes in
tests/crash/test_head_of_line.py.
"""

from __future__ import annotations

from typing import Any, cast

import tether
from tests.worker.helpers import running, wait_until
from tether._context import JobContext
from tether._worker.completer import Completer
from tether._worker.registry import Registry, Running, Settlement, Stage
from tether._worker.threads.claimahead import HORIZON, ClaimAhead
from tether.stores import JobRecord, Store


def _entry(job_id: int) -> Running:
    job = JobRecord(id=job_id, task="t", queue="default", payload="[[],{}]", status="running",
              priority=0, run_at=0.0, attempt=1, max_attempts=3, failures=0, stall_count=0,
              max_stalls=3, interruptions=0, locked_by="w", lease_until=30.0, created_at=0.0,
              started_at=0.0, finished_at=None, last_error=None, failure_reason=None,
              result=None, checkpoint=None, progress=None, unique_key=None,
              cancel_requested=False, lease_token=f"tok{job_id}")
    return Running(JobContext(job, cast(Store, None)), trusted_until=1e18)


def _policy(capacity: int = 10, limit: int = 100) -> tuple[Registry, ClaimAhead]:
    reg = Registry(capacity)
    return reg, ClaimAhead(reg, limit, cast(Completer, None), lambda: None)


def test_no_claim_ahead_before_a_handler_time_is_measured() -> None:
    reg, ahead = _policy()
    ahead.update(now=1.0)
    assert reg.ahead == 0
    assert reg.free() == 10  # exactly the free slots, as before claim-ahead


def test_claim_ahead_is_what_can_start_within_the_horizon() -> None:
    reg, ahead = _policy()
    ahead.observe(0.01)  # 10 ms handlers: 10 slots start 10 * 0.05 / 0.01 = 50 jobs in time
    ahead.update(now=1.0)
    assert reg.ahead == int(10 * HORIZON / 0.01)
    assert reg.free() == 10 + reg.ahead
    ahead.observe(1e-6)  # tiny handlers: capped by claim_batch
    ahead.mean = 1e-6
    ahead.update(now=1.0)
    assert reg.ahead == 100
    ahead.mean = 5.0  # long handlers: nothing ahead
    ahead.update(now=1.0)
    assert reg.ahead == 0


def test_slots_held_by_long_handlers_do_not_count() -> None:
    reg, ahead = _policy(capacity=4)
    ahead.mean = 0.001
    for i in range(4):
        reg.add(_entry(i + 1))  # four handlers started now
    ahead.update(now=reg.entries()[0].started_at + 10.0)  # ... and still running 10 s later
    assert reg.ahead == 0
    assert reg.free() == 0


def test_backlog_is_taken_in_order_and_refilled_at_half() -> None:
    reg = Registry(2)
    reg.ahead = 4
    entries = [_entry(i + 1) for i in range(3)]
    reg.queue(entries, wake=0)
    assert reg.free() <= 0  # more than half the allowance queued: no claim yet
    first, second = reg.take(), reg.take()
    assert (first, second) == (entries[0], entries[1])  # oldest first
    assert reg.queued() == 1
    assert reg.free() == 2 - 2 - 1 + 4  # half used: refill up to the slots plus the allowance
    reg.mark(first, returned=True)
    assert reg.take() is entries[2]


def test_unqueue_hands_out_each_entry_once_and_never_to_a_handler() -> None:
    reg = Registry(1)
    a, b = _entry(1), _entry(2)
    reg.queue([a, b], wake=0)
    out = reg.unqueue()
    assert out == [a, b] and reg.queued() == 0
    assert all(e.stage is Stage.RETURNED and e.settlement is Settlement.SETTLING for e in out)
    assert reg.unqueue() == []
    assert not reg.settle_once(a)  # the hand-back owns the outcome


def test_a_worker_claims_more_than_its_free_slots_for_short_jobs(make_app: Any) -> None:
    app: tether.App = make_app()

    @app.task(name="noop")
    def noop() -> None:
        return None

    sizes: list[int] = []
    claim = app.store.claim

    def counting_claim(*args: Any, **kwargs: Any) -> Any:
        jobs = claim(*args, **kwargs)
        sizes.append(len(jobs))
        return jobs

    app.store.claim = counting_claim  # type: ignore[method-assign]
    ids = noop.enqueue_many([((), {})] * 300)
    with running(app, concurrency=2, maintenance=False):
        wait_until(lambda: all(app.get_job(i).status == "done" for i in ids), 60,
                   "the jobs to be done")
    assert sizes and sizes[0] <= 2  # no handler time measured yet: only the free slots
    assert max(sizes) > 2, f"never claimed ahead of 2 slots: claim sizes {sizes}"
