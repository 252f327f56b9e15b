"""``schedule_tick`` whose reply was lost after the store applied it (through the fault proxy,
``faulty``, against the real server): the call is repeated and the tick still has exactly one
job.

PostgreSQL: the proxy swallows the reply to the transaction's COMMIT (the tick and its job are
committed) and hangs up; the store says StoreUnavailable and the caller repeats the call.
Redis: the proxy swallows the script's reply; redis-py (or the caller) runs the script again.
Either way the repeat finds the tick recorded and enqueues nothing.
"""

from __future__ import annotations

import pytest

from tests.contract.helpers import Faulty, lacks
from tether._errors import StoreUnavailable
from tether.stores import NewJob, Store

pytestmark = pytest.mark.timeout(60)


def test_a_tick_whose_reply_was_lost_has_one_job(
    store_kind: str, store: Store, faulty: Faulty,
) -> None:
    proxy, lossy = faulty.proxy, faulty.open()
    t0 = store.now()
    lossy.schedule_tick("warm-up", t0, None)  # connection open, script loaded
    # PostgreSQL: the COMMIT message itself (NUL-terminated: not "READ COMMITTED" in a comment)
    proxy.drop_next_reply(b"COMMIT\x00" if store_kind == "postgres" else b"lost-tick")

    def call() -> int | None:
        return lossy.schedule_tick("lost-tick", t0, NewJob("t", queue="lost"), now=t0)

    try:
        first = call()
    except StoreUnavailable:
        first = None
    assert proxy.dropped == 1 and not proxy.drop_pending, "no reply was lost"
    assert call() is None  # the caller's repeat: the tick is taken
    [job] = store.list_jobs(queue="lost")
    assert first in (None, job.id)
    state = next(s for s in store.schedules() if s.name == "lost-tick")
    assert (state.last_tick, state.last_job_id) == (t0, job.id)


def test_a_reply_lost_before_the_commit_rolls_the_tick_back(
    store: Store, faulty: Faulty, store_kind: str, request: pytest.FixtureRequest,
) -> None:
    """The reply to the tick's first statement is lost: the connection goes, the transaction
    rolls back (tick and job), and the repeat enqueues the one job."""
    lacks(request, store_kind, redis="a tick is one Lua script: there is no statement before "
          "the commit whose reply could be lost on its own", **dict.fromkeys(
              ("remote-sqlite", "remote-postgres", "remote-redis"),
              "through tether:// the proxy sits between the client and the tether server, "
              "where one call is one message: no statement of the tick travels there"))
    proxy, lossy = faulty.proxy, faulty.open()
    t0 = store.now()
    lossy.schedule_tick("warm-up", t0, None)
    proxy.drop_next_reply(b"WHERE s.last_tick < excluded.last_tick")  # schedule_claim
    with pytest.raises(StoreUnavailable):
        lossy.schedule_tick("rolled-back", t0, NewJob("t", queue="rb"), now=t0)
    assert proxy.dropped == 1
    assert [s.name for s in store.schedules()] == ["warm-up"]
    job_id = lossy.schedule_tick("rolled-back", t0, NewJob("t", queue="rb"), now=t0)
    assert [j.id for j in store.list_jobs(queue="rb")] == [job_id]
