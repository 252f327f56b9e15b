"""Lost replies (issue #8, C): the server ran the call, the reply never arrived.

A client may send a command again after a ConnectionError, including one that came *after*
the server ran it (redis-py's ``Retry`` does). Each test drops exactly that reply through the
fault proxy (``faulty``: the request reaches the real server, its answer is swallowed and the
connection closed) and checks that the call still acted once: no duplicate job, no job left
running under a worker that never heard of it, no applied outcome reported rejected, no
leader lost. ``store`` is the same store reached directly, to see what really happened.

A call may also surface the loss as ``StoreUnavailable``; the caller then repeats it (with the
same request id where the call takes one), which ``transient`` does here.
test_lost_replies_surfaced.py has the stores that always surface it.
"""

from __future__ import annotations

import pytest

import tether
from tests.contract.helpers import Faulty, lacks, transient
from tests.faults import FaultProxy
from tether._errors import StoreUnavailable
from tether.stores import Lease, NewJob, Outcome, Store

pytestmark = pytest.mark.timeout(60)


def _dropped(proxy: FaultProxy) -> None:
    assert not proxy.drop_pending, "the request never went through the proxy"
    assert proxy.dropped == 1, "no reply was dropped: the test tested nothing"


def test_enqueue_whose_reply_is_lost_creates_one_job(faulty: Faulty, store: Store) -> None:
    proxy = faulty.proxy
    lossy = faulty.store
    lossy.enqueue([NewJob("warm-up")])  # scripts loaded, connection open
    proxy.drop_next_reply(b"lost-enqueue")
    ids = transient(lambda: lossy.enqueue([NewJob("lost-enqueue")], request_id="r-enq-1"))
    _dropped(proxy)
    jobs = [j for j in store.list_jobs(limit=100) if j.task == "lost-enqueue"]
    assert [j.id for j in jobs] == ids, "the replayed enqueue inserted the job twice"


def test_enqueue_without_request_id_is_still_not_replayed_twice(
    faulty: Faulty, store: Store
) -> None:
    """The client's own automatic retry must not duplicate a plain ``enqueue`` either."""
    proxy = faulty.proxy
    lossy = faulty.store
    lossy.enqueue([NewJob("warm-up")])
    proxy.drop_next_reply(b"lost-plain-enqueue")
    try:
        ids: list[int] | None = lossy.enqueue([NewJob("lost-plain-enqueue")])
    except StoreUnavailable:  # surfaced to the caller, who decides
        ids = None
    _dropped(proxy)
    jobs = [j for j in store.list_jobs(limit=100) if j.task == "lost-plain-enqueue"]
    assert len(jobs) == 1, f"one enqueue call made {len(jobs)} jobs"
    if ids is not None:
        assert ids == [jobs[0].id]


def test_claim_whose_reply_is_lost_leaves_no_orphan(faulty: Faulty, store: Store) -> None:
    proxy = faulty.proxy
    lossy = faulty.store
    lossy.enqueue([NewJob("t", queue="lost-claim") for _ in range(3)])
    lossy.claim("warm-up", ["elsewhere"], 1, 30)
    proxy.drop_next_reply(b"w-lost-claim")
    jobs = transient(
        lambda: lossy.claim("w-lost-claim", ["lost-claim"], 1, 30, request_id="c" * 32)
    )
    _dropped(proxy)
    running = store.list_jobs(status="running", queue="lost-claim", limit=100)
    assert {j.id for j in running} == {j.id for j in jobs}, (
        "a job is running under a worker that was never told it claimed it"
    )
    assert len(jobs) == 1


def test_claim_without_request_id_whose_reply_is_lost_leaves_no_orphan(
    faulty: Faulty, store: Store, store_kind: str, request: pytest.FixtureRequest
) -> None:
    """The store's own nonce makes redis-py's automatic replay of a plain claim safe too."""
    lacks(request, store_kind, postgres="a plain claim (no request id) whose reply is lost "
          "keeps its jobs until their leases expire: only a request id makes the retry find "
          "them, and the worker always passes one",
          # The tether:// client draws the request id itself and resends with it.
          **{"remote-postgres": ""})
    proxy = faulty.proxy
    lossy = faulty.store
    lossy.enqueue([NewJob("t", queue="lost-plain-claim") for _ in range(3)])
    lossy.claim("warm-up", ["elsewhere"], 1, 30)
    proxy.drop_next_reply(b"w-lost-plain-claim")
    try:
        jobs = lossy.claim("w-lost-plain-claim", ["lost-plain-claim"], 1, 30)
    except StoreUnavailable:  # the caller would retry; what matters is what is running
        jobs = []
    _dropped(proxy)
    running = store.list_jobs(status="running", queue="lost-plain-claim", limit=100)
    assert {j.id for j in running} == {j.id for j in jobs}, (
        "a job is running under a worker that was never told it claimed it"
    )


def test_finish_whose_reply_is_lost_is_not_reported_rejected(
    faulty: Faulty, store: Store
) -> None:
    proxy = faulty.proxy
    lossy = faulty.store
    warm_id, job_id = lossy.enqueue([NewJob("t", queue="lost-finish") for _ in range(2)])
    warm, job = lossy.claim("w1", ["lost-finish"], 2, 30)
    assert (warm.id, job.id) == (warm_id, job_id)
    assert lossy.finish([Outcome(warm.lease, "done")]) == []  # the script is loaded
    proxy.drop_next_reply(b"lost-finish-result")  # (PostgreSQL sends the result escaped)
    rejected = transient(
        lambda: lossy.finish([Outcome(job.lease, "done", result='"lost-finish-result"')])
    )
    _dropped(proxy)
    assert rejected == [], "our own applied outcome came back as rejected (lease_lost)"
    after = store.get_job(job_id)
    assert after is not None and (after.status, after.result) == ("done", '"lost-finish-result"')


def test_heartbeat_whose_reply_is_lost_renews_and_loses_nothing(
    faulty: Faulty, store: Store
) -> None:
    proxy = faulty.proxy
    lossy = faulty.store
    lossy.enqueue([NewJob("t", queue="lost-beat")])
    (job,) = lossy.claim("w-lost-beat", ["lost-beat"], 1, 30)
    lossy.heartbeat("w-lost-beat", [], 30)  # the script is loaded
    t0 = lossy.now()
    proxy.drop_next_reply(b"w-lost-beat")
    beat = transient(lambda: lossy.heartbeat("w-lost-beat", [job.lease], 300))
    _dropped(proxy)
    assert beat.lost == frozenset()
    after = store.get_job(job.id)
    assert after is not None and after.status == "running"
    assert after.lease_until is not None and after.lease_until > t0 + 200


def test_leader_acquire_whose_reply_is_lost_leaves_an_acting_leader(
    faulty: Faulty, store: Store
) -> None:
    proxy = faulty.proxy
    lossy = faulty.store
    lossy.leader_acquire("warm-up", "nobody", 30)
    proxy.drop_next_reply(b"holder-lost-acquire")
    lead = transient(lambda: lossy.leader_acquire("reaper", "holder-lost-acquire", 30))
    _dropped(proxy)
    assert lead is not None, "the holder was told it does not lead, yet it holds the lease"
    assert lead.holder == "holder-lost-acquire"
    assert lossy.leader_renew("reaper", lead.holder, lead.term, 30) is not None
    assert store.leader_acquire("reaper", "someone-else", 30) is None


def test_leader_release_and_renew_replays_are_harmless(
    faulty: Faulty, store: Store
) -> None:
    proxy = faulty.proxy
    lossy = faulty.store
    lossy.leader_renew("warm-up", "nobody", 1, 30)  # the scripts are loaded
    lossy.leader_release("warm-up", "nobody", 1)
    lead = lossy.leader_acquire("maint", "h-lost", 30)
    assert lead is not None
    proxy.drop_next_reply(b"h-lost")
    renewed = transient(lambda: lossy.leader_renew("maint", "h-lost", lead.term, 30))
    _dropped(proxy)
    assert renewed is not None and renewed.term == lead.term
    lossy.now()  # reconnect
    proxy.drop_next_reply(b"h-lost")
    transient(lambda: lossy.leader_release("maint", "h-lost", lead.term))
    assert proxy.dropped == 2
    # Released once: someone else can take it now, with the next term.
    other = store.leader_acquire("maint", "h-other", 30)
    assert other is not None and other.term == lead.term + 1


def test_the_lost_reply_fence_is_exact(
    faulty: Faulty, store: Store, store_kind: str, request: pytest.FixtureRequest
) -> None:
    """A replayed finish is recognised by its own token only: a forged lease with the same
    id, attempt and owner is still rejected after the job finished."""
    lossy = faulty.store
    lossy.enqueue([NewJob("t", queue="lost-exact")])
    (job,) = lossy.claim("w1", ["lost-exact"], 1, 30)
    assert lossy.finish([Outcome(job.lease, "done", result="1")]) == []
    forged = Lease(job.id, job.attempt, job.lease.owner, "f" * 32 + f":{job.id}")
    assert lossy.finish([Outcome(forged, "done", result="2")]) == [forged]
    other_owner = Lease(job.id, job.attempt, "w2", job.lease.token)
    assert lossy.finish([Outcome(other_owner, "done", result="2")]) == [other_owner]
    after = store.get_job(job.id)
    assert after is not None and after.result == "1"


def test_an_apps_enqueue_whose_reply_is_lost_inserts_once(faulty: Faulty, store: Store) -> None:
    """App.enqueue's own retry (one request id for every attempt) after a lost reply: one job."""
    proxy = faulty.proxy
    app = tether.App(faulty.url)
    try:
        app.store.check_schema()
        proxy.drop_next_reply(b"lost.reply.task")
        job_id = app.enqueue("lost.reply.task", 1)
        assert proxy.dropped == 1
        jobs = store.list_jobs()
        assert [j.id for j in jobs] == [job_id]
    finally:
        app.close()
