"""No head-of-line blocking from claiming ahead (issue #10), with real worker processes.

A worker claims more jobs than it has free slots when its recent handlers were short. If long
jobs then fill its slots, the jobs it claimed ahead must not wait for them while another worker
is idle: the worker hands them back (``released``, ``run_at`` kept) after
``ahead.HAND_BACK_AFTER`` and the idle worker runs them.

The setup makes a naive claim-ahead fail: both workers first run short jobs (so each has a
small mean handler time and claims ahead), then 4 ten-second jobs followed by 40 no-ops are
enqueued in one batch. Whichever worker claims first takes all 44 in one claim (its slots plus
its allowance): 4 long jobs fill its 4 slots and the 40 no-ops queue behind them. Without the
hand-back they start only when the long jobs end, 10 s later.
"""

from __future__ import annotations

import time

import pytest

from tests.crash.harness import Cluster, all_in, enqueue, wait_for
from tether._worker.threads.claimahead import HAND_BACK_AFTER
from tether.stores import Store

LONG = 10.0
SLOTS = 4
NOOPS = 40
WARM_UP = 0.01  # seconds per warm-up job: short, yet not over before the other worker claims


def _starts(cluster: Cluster) -> dict[int, dict[str, float]]:
    """job id -> its first handler start record."""
    out: dict[int, dict[str, float]] = {}
    for r in cluster.records("runs"):
        if r["event"] == "start":
            out.setdefault(r["job"], r)
    return out


@pytest.mark.crash
@pytest.mark.timeout(90)
def test_no_op_jobs_never_wait_behind_long_ones(cluster: Cluster, store: Store) -> None:
    a, b = cluster.spawn(SLOTS), cluster.spawn(SLOTS)
    cluster.wait_registered(store, a, b)

    # Warm up until both workers have measured short handlers (so both claim ahead). Each
    # warm-up job takes WARM_UP seconds: with no-ops, the first worker to measure one claims
    # ahead up to claim_batch (100) and ran every round's 20 jobs in 2 ms, so the other
    # never ran one (seen in CI). 20 jobs of 10 ms hold one worker's 4 slots for 50 ms,
    # which leaves the other worker time to claim its share.
    for _ in range(10):
        ids = enqueue(store, "crash.work", WARM_UP, n=20)
        wait_for(lambda ids=ids: all_in(store, ids, "done"), 30, "the warm-up jobs")
        if {r["pid"] for r in cluster.records("runs")} >= {a.pid, b.pid}:
            break
    else:
        pytest.fail("one worker never ran a warm-up job")
    warm = set(_starts(cluster))

    sent = time.time()
    long_ids = enqueue(store, "crash.work", LONG, n=SLOTS)
    noop_ids = enqueue(store, "crash.work", 0.0, n=NOOPS)
    wait_for(lambda: all_in(store, noop_ids, "done"), LONG + 30, "the no-op jobs")
    starts = _starts(cluster)
    assert not warm & set(noop_ids)
    waits = {i: starts[i]["t"] - sent for i in noop_ids}
    worst = max(waits, key=lambda i: waits[i])
    # Far below the long jobs' 10 s: at most the hand-back bound plus a claim by the other
    # worker, with room for a loaded machine.
    assert waits[worst] < HAND_BACK_AFTER + 2.5, (
        f"no-op job {worst} waited {waits[worst]:.2f}s from enqueue to start (long jobs: "
        f"{LONG}s); waits: {sorted(round(w, 2) for w in waits.values())}")
    # The long jobs are still running: every no-op got past them, none waited for one to end.
    assert all(store.get_job(i).status == "running" for i in long_ids)  # type: ignore[union-attr]
