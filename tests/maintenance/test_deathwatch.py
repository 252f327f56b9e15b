"""The death watch inside real maintainers (issue #22), on every store: a worker whose token is
released has its jobs back at once, a dead leader's lease passes, a held token is left alone.
"Died" is ``release_liveness``; real processes are tests/crash/test_liveness_crash.py's."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import pytest

from tether._config import make_settings
from tether._events import Event, Events
from tether._maintenance.deathwatch import CONFIRM
from tether._maintenance.maintainer import ELECTION, Maintainer
from tether.stores import NewJob, Store

pytestmark = pytest.mark.timeout(60)
SETTINGS = make_settings(lease_ttl=600.0)  # only death can bring a job back in a test


def _until(cond: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + 30
    while not cond():
        assert time.monotonic() < deadline, f"never: {what}"
        threading.Event().wait(0.02)


def _maintainer(store: Store, holder: str, events: Events) -> Maintainer:
    assert store.take_liveness(holder)
    return Maintainer(store, holder, SETTINGS, events)


def test_a_dead_workers_jobs_and_a_dead_leaders_lease_come_back(
    store: Store, open_another: Callable[[], Store]
) -> None:
    leader_id, follower_id, worker_id = (f"h:{n}:{uuid.uuid4().hex[:8]}" for n in range(3))
    events = Events()
    stalled: list[Event] = []
    events.on("stalled", stalled.append)
    assert store.take_liveness(worker_id)
    queue = f"q{uuid.uuid4().hex[:6]}"
    (alive_job, dead_job) = store.enqueue([NewJob("t", queue=queue)] * 2)
    store.claim("someone-without-a-token", [queue], 1, 600)
    store.claim(worker_id, [queue], 1, 600)
    leader = _maintainer(open_another(), leader_id, events)
    follower = _maintainer(open_another(), follower_id, events)
    leader.start()
    _until(lambda: leader.elector is not None and leader.elector.is_leader, "a leader")
    follower.start()
    try:
        started = time.monotonic()
        store.release_liveness(worker_id)  # the worker died
        _until(lambda: store.get_job(dead_job).status == "pending",  # type: ignore[union-attr]
               "the dead worker's job back")
        assert time.monotonic() - started >= CONFIRM * 0.9, "acted before confirming"
        assert store.get_job(alive_job).status == "running"  # type: ignore[union-attr]
        # The event follows the reap's write (the maintainer emits it once reap_dead returns):
        # the job can read pending a moment before it is emitted.
        _until(lambda: bool(stalled), "the stalled event")
        assert [(e.job_id, e.detail["died"]) for e in stalled] == [(dead_job, True)]

        store.release_liveness(leader_id)  # the leader died (its loop still runs: a zombie)
        _until(lambda: (lead := store.leader(ELECTION)) is not None
               and lead.holder.startswith(follower_id), "leadership to pass")
    finally:
        follower.stop()
        leader.stop()
        store.release_liveness(follower_id)


def test_death_detection_off_leaves_everything_to_the_lease(store: Store) -> None:
    settings = make_settings(lease_ttl=600.0, death_check_interval=0)
    assert Maintainer(store, "h:1:x", settings, Events()).watch is None
