"""Reaper, pruner and leader election, each driven by ``run_once`` against every store."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tether._config import make_settings
from tether._errors import StoreUnavailable
from tether._events import Event, Events
from tether._maintenance.leadership import LeaderElector
from tether._maintenance.maintainer import Maintainer
from tether._maintenance.pruner import Pruner
from tether._maintenance.reaper import Reaper
from tether.stores import NewJob, Outcome, Store

pytestmark = pytest.mark.timeout(60)


def until(cond: Callable[[], object], timeout: float) -> bool:
    """Poll ``cond`` until it holds or ``timeout`` seconds pass; returns whether it held.
    (Replaces 100-poll loops, 2 s and 5 s in all: short for a thread start on a loaded CI.)"""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        threading.Event().wait(0.02)
    return True


def recorder(events: Events, *names: str) -> list[Event]:
    got: list[Event] = []
    for name in names:
        events.on(name, got.append)
    return got


def test_reaper_sweeps_once_logs_and_emits(store: Store,
                                           caplog: pytest.LogCaptureFixture) -> None:
    t0 = store.now()
    store.enqueue([NewJob("t", max_stalls=1) for _ in range(3)], now=t0)
    store.enqueue([NewJob("t") for _ in range(2)], now=t0)
    store.claim("dead", ["default"], 5, 10, now=t0)
    events = Events()
    got = recorder(events, "stalled")
    reaper = Reaper(store, events, stall_grace=5, interval=30, batch=2)
    assert reaper.run_once(now=t0 + 14) == []  # expired, but inside the grace
    with caplog.at_level(logging.INFO, logger="tether.reaper"):
        reaped = reaper.run_once(now=t0 + 16)
    assert len(reaped) == 5  # several batches of 2 in one sweep
    assert "released stale running jobs count=5" in caplog.text
    assert sorted(e.detail["status"] for e in got) == ["failed"] * 3 + ["pending"] * 2
    assert reaper.run_once(now=t0 + 17) == []


def test_reaper_sleeps_until_the_earliest_expiry(store: Store) -> None:
    reaper = Reaper(store, Events(), stall_grace=0.5, interval=30)
    assert reaper.next_wait() == 30  # nothing running: the longest sleep
    store.enqueue([NewJob("t")])
    store.claim("w", ["default"], 1, 4.0)
    assert 3.0 < reaper.next_wait() <= 4.6


def test_pruner_respects_status_and_retention(store: Store) -> None:
    t0 = store.now()
    ids = store.enqueue([NewJob("t", max_attempts=1) for _ in range(4)], now=t0)
    jobs = store.claim("w", ["default"], 4, 30, now=t0)
    store.finish([Outcome(jobs[0].lease, "done"), Outcome(jobs[1].lease, "done"),
                  Outcome(jobs[2].lease, "error", error="x", reason="error")], now=t0)
    pruner = Pruner(store, {"done": 100, "failed": 1000}, batch=1)
    assert pruner.run_once(now=t0 + 50) == 0
    assert pruner.run_once(now=t0 + 101) == 2
    assert store.get_job(ids[0]) is None and store.get_job(ids[2]) is not None
    assert store.get_job(ids[3]) is not None  # still running: never pruned
    assert pruner.run_once(now=t0 + 1001) == 1


def test_only_one_elector_leads_and_a_successor_takes_over(store: Store,
                                                          open_another: Callable[[], Store]
                                                          ) -> None:
    events = Events()
    got = recorder(events, "leadership_acquired", "leadership_lost")
    electors = [LeaderElector(open_another(), "maint", f"h{i}", events, ttl=0.6, retry=0.1)
                for i in range(4)]
    barrier = threading.Barrier(len(electors))

    def contend(e: LeaderElector) -> None:
        barrier.wait()
        e.run_once()

    threads = [threading.Thread(target=contend, args=(e,)) for e in electors]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    leaders = [e for e in electors if e.is_leader]
    assert len(leaders) == 1
    first = leaders[0]
    term = first.lease.term  # type: ignore[union-attr]
    first.run_once()  # renews
    assert first.is_leader and first.lease.term == term  # type: ignore[union-attr]
    first.release()
    assert not first.is_leader
    others = [e for e in electors if e is not first]
    for e in others:
        e.run_once()
    successors = [e for e in others if e.is_leader]
    assert len(successors) == 1 and successors[0].lease.term > term  # type: ignore[union-attr]
    assert [e.name for e in got] == ["leadership_acquired", "leadership_lost",
                                     "leadership_acquired"]


class Unreachable:
    def __init__(self, inner: Store) -> None:
        self.inner, self.down = inner, False

    def leader_renew(self, *a: Any, **kw: Any) -> Any:
        if self.down:
            raise StoreUnavailable("injected")
        return self.inner.leader_renew(*a, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_leader_that_cannot_renew_stops_acting_when_its_window_ends(store: Store) -> None:
    flaky = Unreachable(store)
    elector = LeaderElector(flaky, "maint", "h", Events(), ttl=0.3, retry=0.1)  # type: ignore[arg-type]
    elector.run_once()
    assert elector.is_leader
    flaky.down = True
    elector.run_once()  # fails, but the window is still open
    assert elector.is_leader
    threading.Event().wait(0.35)
    assert not elector.is_leader  # no store answer needed to stop acting


def test_maintainer_reaps_only_when_leading(store: Store,
                                            open_another: Callable[[], Store]) -> None:
    settings = make_settings(lease_ttl=1.0, prune_interval=0)
    rival = LeaderElector(open_another(), "maintenance", "rival", Events(), ttl=5, retry=1)
    rival.run_once()
    assert rival.is_leader
    maintainer = Maintainer(open_another(), "me", settings, Events())
    store.enqueue([NewJob("t")])
    store.claim("dead", ["default"], 1, 0.2)
    maintainer.start()
    try:
        threading.Event().wait(0.8)
        assert store.list_jobs(status="running"), "a follower must not reap"
        rival.release()
        assert until(lambda: not store.list_jobs(status="running"), 10), "the new leader reaps"
    finally:
        maintainer.stop()


class SlowHousekeeping:
    """The real store, with a housekeeping that takes a long time (a big VACUUM)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.calls = 0
        self.release = threading.Event()

    def housekeeping(self) -> str | None:
        self.calls += 1
        self.release.wait(10)
        return "slow"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.slow
def test_housekeeping_runs_beside_the_reaper_not_in_its_way(
    store: Store, open_another: Callable[[], Store]
) -> None:
    settings = make_settings(lease_ttl=1.0, prune_interval=0, election=False)
    slow = SlowHousekeeping(open_another())
    maintainer = Maintainer(slow, "me", settings, Events())  # type: ignore[arg-type]
    maintainer.start()
    try:
        until(lambda: slow.calls, 10)
        assert slow.calls == 1  # started, and still running
        store.enqueue([NewJob("t")])
        store.claim("dead", ["default"], 1, 0.2)
        # reaped while housekeeping is still blocked
        assert until(lambda: not store.list_jobs(status="running"), 10)
        assert slow.calls == 1  # never started twice at once
    finally:
        slow.release.set()
        maintainer.stop()
