"""Flow limits across real worker processes (issue #19): reached and never exceeded by three
``tether worker -c 10`` processes, and a SIGKILLed worker's slots back exactly at the reap.

How many ran at once is computed from the handlers' own start/end records (tests/crash/
flow_app.py): each record interval lies inside its job's ``running`` time in the store, so
an overlap above the limit would prove the store broke it. A killed attempt has no end
record; it ends when the reaper took its lease back (its stall record's ``at``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from tests.crash import flow_app
from tests.crash.harness import Cluster, all_in, enqueue, get, held_by, wait_for
from tether.stores import Store

APP = "tests.crash.flow_app:app"
pytestmark = [pytest.mark.crash, pytest.mark.timeout(120)]


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The largest number of intervals that overlap at one instant."""
    edges = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals],
                   key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def attempts(cluster: Cluster, ends: dict[tuple[int, int], float] | None = None) \
        -> dict[tuple[int, int], dict[str, Any]]:
    """(job, attempt) -> {"start", "end", ...} from the runs records; ``ends`` closes the
    attempts that have no end record (killed)."""
    out: dict[tuple[int, int], dict[str, Any]] = defaultdict(dict)
    for r in cluster.records("runs"):
        key = (r["job"], r["attempt"])
        out[key].setdefault("pid", r["pid"])
        out[key].setdefault("customer", r.get("customer"))
        if r["event"] == "start":
            out[key]["start"] = r["t"]
        elif r["event"] in ("end", "interrupted"):
            out[key]["end"] = r["t"]
    for key, t in (ends or {}).items():
        out[key].setdefault("end", t)
    return dict(out)


def test_three_workers_reach_the_limit_and_never_exceed_it(
    cluster: Cluster, store: Store,
) -> None:
    workers = [cluster.spawn(10, app=APP) for _ in range(3)]
    cluster.wait_registered(store, *workers)
    ids = enqueue(store, "flow.limited", 0.4, n=40)
    # Built by the task itself, as a producer that imports it does: the key is read from the
    # call (a producer enqueueing by bare name would have to pass limit_key= itself).
    keyed = store.enqueue([flow_app.keyed.new_job((c, 0.4), {})
                           for c in ("acme", "globex", "initech") for _ in range(8)])
    wait_for(lambda: all_in(store, ids + keyed, "done"), 90, "every job")
    runs = attempts(cluster)
    limited = [(r["start"], r["end"]) for (job, _), r in runs.items() if job in set(ids)]
    assert len(limited) == 40
    assert most_at_once(limited) == 4, "the limit (4) is reached and never exceeded"
    by_key: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for (job, _), r in runs.items():
        if job in set(keyed):
            by_key[r["customer"]].append((r["start"], r["end"]))
    assert {k: most_at_once(v) for k, v in by_key.items()} == {
        "acme": 2, "globex": 2, "initech": 2}, "2 per key, reached by every key"
    assert most_at_once([iv for v in by_key.values() for iv in v]) == 6
    assert len({r["pid"] for r in runs.values()}) > 1, "more than one worker ran them"


def test_a_killed_workers_slots_come_back_at_the_reap_and_not_before(
    cluster: Cluster, store: Store,
) -> None:
    doomed = cluster.spawn(10, app=APP)
    cluster.wait_registered(store, doomed)
    ids = enqueue(store, "flow.limited", 60.0, 0.2, n=6)
    def four() -> list[Any] | None:
        got = held_by(store, doomed.pid)
        return got if len(got) == 4 else None

    held = wait_for(four, 30, "the doomed worker to hold the 4 slots")
    survivor = cluster.spawn(10, app=APP)
    cluster.wait_registered(store, survivor)
    killed_at = doomed.kill()
    wait_for(lambda: all_in(store, ids, "done"), 90, "every job, after the reap")
    held_ids = {j.id for j in held}
    reaped_at = {}
    for job_id in held_ids:
        job = get(store, job_id)
        assert job.attempt == 2 and job.stall_count == 1, job
        (stall,) = [e for e in job.error_history if e["attempt"] == 1]
        reaped_at[job_id] = float(stall["at"])  # the store's clock (this machine's)
    first_reap = min(reaped_at.values())
    assert first_reap >= killed_at, "the leases outlived the worker until the reaper came"
    runs = attempts(cluster, {(j, 1): t for j, t in reaped_at.items()})
    survivor_starts = sorted(r["start"] for r in runs.values() if r["pid"] != doomed.pid)
    assert len(survivor_starts) == 6, "the 4 reaped jobs again, and the 2 that waited"
    # Every slot was the dead worker's until the reap: nothing started before it.
    assert survivor_starts[0] >= first_reap - 0.05, (
        f"a job started {first_reap - survivor_starts[0]:.3f}s before the reap")
    assert most_at_once([(r["start"], r["end"]) for r in runs.values()]) == 4
