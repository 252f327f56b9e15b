"""A reply lost after the write, then the same call again: the effect happens once (issue #8,
C and the acceptance's dropped-reply tests, at the store level, through the real server).

The fault proxy (``faulty``) forwards the request, lets the server run (and, autocommit,
commit) it, then swallows the reply and hangs up. The store reports StoreUnavailable; the
caller retries the same call with the same request id, as a worker does. A store whose client
resends the command by itself never reports the loss: test_lost_replies.py covers it there.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.contract.helpers import Faulty, lacks
from tests.faults import FaultProxy
from tether._errors import StoreUnavailable
from tether.stores import NewJob, Outcome, Store

RESENDS = "redis-py resends a command whose reply was lost, so the loss never surfaces"
#: The tether:// client sends the same request bytes again (request id included) after a
#: transport failure, on the next host or the same one: the loss never surfaces either.
REMOTE_RESENDS = ("the tether:// client resends a call whose reply was lost (the same request "
                  "id), so the loss never surfaces")


@pytest.fixture(autouse=True)
def _surfacing_stores(request: pytest.FixtureRequest, store_kind: str) -> None:
    lacks(request, store_kind, redis=RESENDS, **{
        kind: REMOTE_RESENDS for kind in ("remote-sqlite", "remote-postgres", "remote-redis")})


def _lose_reply(proxy: FaultProxy, marker: bytes, call: Callable[[], object]) -> None:
    proxy.drop_next_reply(marker)
    with pytest.raises(StoreUnavailable):
        call()
    assert proxy.dropped == 1 and not proxy.drop_pending


def test_enqueue_whose_reply_was_lost_inserts_once(
    store: Store, faulty: Faulty
) -> None:
    lossy, proxy = faulty.store, faulty.proxy
    one = [NewJob("t", queue="e1")]
    batch = [NewJob("t", queue="e2"), NewJob("t", queue="e2", unique_key="u")]
    _lose_reply(proxy, b"req-e1", lambda: lossy.enqueue(one, request_id="req-e1"))
    ids = lossy.enqueue(one, request_id="req-e1")
    assert [j.id for j in store.list_jobs(queue="e1")] == ids
    proxy.dropped = 0
    _lose_reply(proxy, b"req-e2", lambda: lossy.enqueue(batch, request_id="req-e2"))
    ids = lossy.enqueue(batch, request_id="req-e2")
    assert [j.id for j in store.list_jobs(queue="e2")] == ids


def test_claim_whose_reply_was_lost_leaves_no_orphan(
    store: Store, faulty: Faulty
) -> None:
    lossy, proxy = faulty.store, faulty.proxy
    store.enqueue([NewJob("t", queue="c") for _ in range(3)])
    rid = "7" * 32
    _lose_reply(proxy, rid.encode(), lambda: lossy.claim("w1", ["c"], 2, 30, request_id=rid))
    assert len(store.list_jobs(status="running", queue="c")) == 2  # the claim happened
    jobs = lossy.claim("w1", ["c"], 2, 30, request_id=rid)
    running = store.list_jobs(status="running", queue="c")
    assert sorted((j.id, j.attempt, j.lease_token) for j in jobs) == sorted(
        (j.id, j.attempt, j.lease_token) for j in running
    ), "the retried claim returns exactly the jobs the lost one took"
    assert len(store.list_jobs(status="pending", queue="c")) == 1


def test_finish_whose_reply_was_lost_is_not_reported_rejected(
    store: Store, faulty: Faulty
) -> None:
    lossy, proxy = faulty.store, faulty.proxy
    store.enqueue([NewJob("t", queue="f"), NewJob("t", queue="f", max_attempts=5)])
    a, b = store.claim("w1", ["f"], 2, 30)
    outcomes = [Outcome(a.lease, "done", result="1"),
                Outcome(b.lease, "error", error="boom", retry_delay=60)]
    _lose_reply(proxy, (a.lease_token or "").encode(), lambda: lossy.finish(outcomes))
    assert lossy.finish(outcomes) == []
    after_a, after_b = store.get_job(a.id), store.get_job(b.id)
    assert after_a is not None and after_b is not None
    assert (after_a.status, after_a.result) == ("done", "1")
    assert (after_b.status, after_b.failures) == ("pending", 1), "counted once"


def test_heartbeat_whose_reply_was_lost_renews_on_retry(
    store: Store, faulty: Faulty
) -> None:
    lossy, proxy = faulty.store, faulty.proxy
    store.enqueue([NewJob("t", queue="h")])
    [job] = store.claim("w1", ["h"], 1, 30)
    _lose_reply(proxy, (job.lease_token or "").encode(),
                lambda: lossy.heartbeat("w1", [job.lease], 60))
    result = lossy.heartbeat("w1", [job.lease], 60)
    assert result.lost == frozenset()
    after = store.get_job(job.id)
    assert after is not None and after.status == "running"


def test_leader_acquire_whose_reply_was_lost_leaves_an_acting_leader(
    store: Store, faulty: Faulty
) -> None:
    lossy, proxy = faulty.store, faulty.proxy
    _lose_reply(proxy, b"holder-lost-reply",
                lambda: lossy.leader_acquire("reaper", "holder-lost-reply", 30))
    lead = lossy.leader_acquire("reaper", "holder-lost-reply", 30)
    assert lead is not None and lead.holder == "holder-lost-reply"
    assert lossy.leader_renew("reaper", lead.holder, lead.term, 30) is not None
    assert store.leader_acquire("reaper", "someone-else", 30) is None
