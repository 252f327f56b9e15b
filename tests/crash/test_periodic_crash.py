"""Periodic jobs under a leader that is killed and paused (issue #12), on every store.

Three ``tether worker tests.crash.periodic_app:app`` processes run an ``every=1`` schedule
(catch-up ``latest``). For ~25 s the test finds the current schedule leader through the store's
leader record (``maintenance:schedule``; the holder string is the worker id ``host:pid:uuid``)
and in turn SIGKILLs it (a fresh worker replaces it), SIGSTOPs it until another worker has
taken over, then SIGCONTs it (it wakes mid-round, believing it may still lead), or SIGSTOPs the
whole fleet for ``OUTAGE`` seconds (a time with no leader at all) and SIGCONTs it. After each
outage the first leader to catch up pauses its maintenance thread *mid-tick* (``periodic_app``:
between reading the due tick and offering it to the store); the test waits until another
leader has enqueued that tick or a later one, then resumes it, so its offer of an old tick
reaches the store. Then:

* every tick has exactly one job: counted per tick (from the payload envelope) and per unique
  key;
* ticks are enqueued in order, none late by more than a takeover;
* a tick is missing only in a leader change: within ``TAKEOVER`` seconds before a
  ``leadership_acquired`` of the schedule election (a dead or paused leader's lease must run
  out first; with ``latest`` only the newest missed tick is then enqueued), in a fleet-wide
  outage, or, on SQLite, while a leader paused inside a write held the file's lock
  (documented: every process waits for it), and the run ends with a stretch of consecutive
  ticks (steady state again);
* every missing tick was passed over by the catch-up policy, not lost: the job after each gap
  is for a tick whose ``schedule_skipped`` event (``why=catch_up=latest``) counts at least the
  gap's ticks as passed over;
* each fleet-wide outage did miss ticks and enqueued only the newest of them (``latest``, not
  ``all``): the policy is exercised, not only tolerated;
* a leader resumed mid-tick enqueued nothing for its old tick (no ``schedule_enqueued`` of
  that tick from it, and the checks above: no tick twice, none out of order).

Workers use lease_ttl 2 s, so the leader lease is 1 s and followers retry every 0.33 s.
"""

from __future__ import annotations

import itertools
import signal
import time
from collections import Counter
from typing import Any

import pytest

from tests.crash.harness import Cluster, Worker, pid_of, wait_for
from tether._maintenance.leadership import split_holder
from tether._maintenance.maintainer import SCHEDULE_ELECTION
from tether._periodic import tick_of
from tether.stores import JobRecord, Store

APP = "tests.crash.periodic_app:app"
CHAOS = 25.0  # seconds of kills and pauses
#: A fleet-wide pause, in store seconds: at least three ticks fall due with no leader at all.
OUTAGE = 3.5
#: How long a tick may go unscheduled around a takeover: the old leader's lease (1 s) runs
#: out, a follower's retry (0.33 s) notices, plus scheduling noise on a loaded 2-core machine.
TAKEOVER = 4.0
#: SQLite: how long to wait for a new leader before taking the pause to be inside a write.
WRITER_PAUSED = 8.0


def scheduled(store: Store) -> list[JobRecord]:
    found: list[JobRecord] = []
    after = None
    while True:
        page = store.list_jobs(queue="periodic", after_id=after, limit=1000)
        found += page
        if len(page) < 1000:
            return found
        after = page[-1].id


def mid_round(cluster: Cluster, what: str, seen: int) -> dict[str, Any] | None:
    """The next ``paused_mid_round`` / ``resumed_mid_round`` record after the first ``seen``."""
    records = [r for r in cluster.records("events") if r["event"] == f"{what}_mid_round"]
    return records[seen] if len(records) > seen else None


def leader_of(store: Store, workers: list[Worker]) -> Worker | None:
    lead = store.leader(SCHEDULE_ELECTION)
    if lead is None:
        return None
    pid = pid_of(split_holder(lead.holder)[0])
    return next((w for w in workers if w.pid == pid and w.alive() and not w.stopped), None)


@pytest.mark.crash
@pytest.mark.timeout(240)
def test_every_tick_once_while_the_schedule_leader_is_killed_and_paused(
        cluster: Cluster, store: Store) -> None:
    workers = [cluster.spawn(1, app=APP) for _ in range(3)]
    cluster.wait_registered(store, *workers)
    wait_for(lambda: len(scheduled(store)) >= 2, 20, "the first scheduled jobs")

    actions: list[tuple[str, float]] = []
    pauses: list[tuple[float, float]] = []  # (SIGSTOP, SIGCONT) wall times
    outages: list[tuple[float, float]] = []  # the whole fleet's (SIGSTOP, SIGCONT)
    mid_tick: list[tuple[int, float, float]] = []  # (pid, tick, resumed) of leaders paused
    # mid-tick
    end = time.monotonic() + CHAOS
    round_ = 0
    while time.monotonic() < end or round_ < 6:  # two of each kind, however slow the machine
        live = [w for w in workers if w.alive()]
        leader = wait_for(lambda live=live: leader_of(store, live), 15,  # type: ignore[misc]
                          "a schedule leader")
        before = len(scheduled(store))
        if round_ % 3 == 0:
            actions.append(("kill", leader.kill()))
            workers.remove(leader)
            workers.append(cluster.spawn(1, app=APP))
            wait_for(lambda gone=leader: (w := leader_of(store, workers)) is not None
                     and w is not gone, 15, "a new leader after the kill")
        elif round_ % 3 == 1:
            stopped = leader.send(signal.SIGSTOP)
            actions.append(("stop", stopped))
            others = [w for w in workers if w is not leader]
            try:
                wait_for(lambda others=others: leader_of(store, others),  # type: ignore[misc]
                         WRITER_PAUSED if store.kind == "sqlite" else 15,
                         "a new leader while the old one is paused")
                time.sleep(0.5)  # the new leader schedules a tick before the old one wakes
            except AssertionError:
                # Documented (guarantees.md): an SQLite process paused *inside* a write holds
                # the file's write lock, and every process waits until it resumes.
                if store.kind != "sqlite":
                    raise
            resumed = leader.send(signal.SIGCONT)
            actions.append(("cont", resumed))
            pauses.append((stopped, resumed))
        else:
            fleet = [w for w in workers if w.alive()]
            # The window is from the last SIGSTOP to the first SIGCONT: no tick in it can have
            # been enqueued before the pause, and at least three fall due in it.
            stopped = max(w.send(signal.SIGSTOP) for w in fleet)
            actions.append(("outage", stopped))
            until = store.now() + OUTAGE
            wait_for(lambda until=until: store.now() >= until, 15,  # type: ignore[misc]
                     "the outage to last its ticks")
            trigger = cluster.folder / "pause-mid-round"
            trigger.touch()  # the first leader to catch up pauses itself mid-tick
            resumed = min(w.send(signal.SIGCONT) for w in fleet)
            actions.append(("resume", resumed))
            outages.append((stopped, resumed))
            seen = len(mid_tick)
            paused = wait_for(lambda seen=seen: mid_round(cluster, "paused", seen),  # type: ignore[misc]
                              15, "a leader to pause mid-tick")
            wait_for(lambda tick=paused["tick"]: max(  # type: ignore[misc]
                tick_of(j.payload) or 0.0 for j in scheduled(store)) >= tick, 15,
                "another leader to enqueue the paused leader's tick")
            (cluster.folder / "resume-mid-round").touch()
            woken = wait_for(lambda seen=seen: mid_round(cluster, "resumed", seen),  # type: ignore[misc]
                             15, "the paused leader to go on")["t"]
            actions.append(("mid-tick resumed", woken))
            pauses.append((paused["t"], woken))
            mid_tick.append((paused["pid"], paused["tick"], woken))
        wait_for(lambda before=before: len(scheduled(store)) > before, 15,  # type: ignore[misc]
                 "scheduling to go on")
        round_ += 1

    # Steady state again: a few more ticks with nobody disturbed.
    settled = len(scheduled(store))
    wait_for(lambda: len(scheduled(store)) >= settled + 3, 15, "three undisturbed ticks")
    jobs = scheduled(store)
    ticks = [tick_of(j.payload) for j in jobs]
    assert None not in ticks
    per_tick = Counter(ticks)
    assert [t for t, n in per_tick.items() if n > 1] == [], "a tick has two jobs"
    keys = Counter(j.unique_key for j in jobs)
    assert [k for k, n in keys.items() if n > 1] == [], "a unique key was enqueued twice"
    assert len(keys) == len(jobs) and None not in keys

    # Enqueued in tick order (jobs are created in id order), never an old tick after a newer.
    in_id_order = [tick_of(j.payload) for j in sorted(jobs, key=lambda j: j.id)]
    assert in_id_order == sorted(per_tick), "a tick was enqueued after a later one"
    for job in jobs:
        tick = tick_of(job.payload)
        assert tick is not None
        late = job.created_at - tick
        assert late <= TAKEOVER, f"tick {tick} enqueued {late:.2f}s late"

    # Missing ticks only in a leader change.
    acquired = [r["t"] for r in cluster.records("events")
                if r["event"] == "leadership_acquired" and r.get("name") == SCHEDULE_ELECTION]
    got = sorted(t for t in per_tick if t is not None)
    missing = [t for t in range(int(got[0]), int(got[-1]) + 1) if float(t) not in per_tick]
    unexplained = [t for t in missing
                   if not any(0 <= a - t <= TAKEOVER + 1 for a in acquired)
                   and not any(stop - 1 <= t <= cont + TAKEOVER
                               for stop, cont in pauses + outages)]
    assert unexplained == [], (f"ticks missing outside a leader change: {unexplained}; "
                               f"actions {actions}; acquisitions {acquired}")
    assert len(missing) <= len(acquired) * TAKEOVER + sum(c - s + 1 for s, c in outages)

    # Every gap was a catch-up decision (latest: the newest due tick, the older ones passed
    # over and reported), never a tick lost between the store and a leader.
    passed = [r for r in cluster.records("events") if r["event"] == "schedule_skipped"
              and r.get("why") != "start"]
    assert {r.get("why") for r in passed} <= {"catch_up=latest"}, passed
    for before_gap, after_gap in itertools.pairwise(got):
        gap = round(after_gap - before_gap) - 1
        if gap > 0:
            assert any(r["tick"] == after_gap and r["missed"] >= gap for r in passed), (
                f"ticks {before_gap + 1}..{after_gap - 1} missing, and no catch-up passed "
                f"them over before tick {after_gap}: {passed}")
    # A time with no leader at all misses ticks, and catch_up="latest" enqueues only the
    # newest of them: an outage of OUTAGE seconds leaves a gap of at least two ticks.
    for stop, cont in outages:
        inside = [t for t in missing if stop <= t <= cont]
        assert len(inside) >= 2, (f"outage {stop:.2f}..{cont:.2f} left only {inside} "
                                  f"missing: its ticks were caught up, not passed over")
    # A leader resumed mid-tick offered an old tick; the store enqueued nothing for it.
    assert len(mid_tick) == len(outages)
    enqueued = [r for r in cluster.records("events") if r["event"] == "schedule_enqueued"]
    for pid, tick, woken in mid_tick:
        late_offer = [r for r in enqueued if r["pid"] == pid and r["tick"] <= tick
                      and r["t"] >= woken]
        assert late_offer == [], f"a leader resumed mid-tick enqueued an old tick: {late_offer}"
    assert got[-3:] == [got[-1] - 2, got[-1] - 1, got[-1]], "no steady state at the end"
    kills = sum(1 for kind, _ in actions if kind == "kill")
    stops = sum(1 for kind, _ in actions if kind == "stop")
    assert kills >= 2 and stops >= 2 and len(outages) >= 2, actions
    print(f"{store.kind}: {len(jobs)} ticks enqueued once each, {len(missing)} missed in "
          f"{len(acquired)} takeovers ({kills} kills, {stops} pauses, {len(outages)} outages)")
