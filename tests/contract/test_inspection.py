"""Inspection: get_job, list_jobs keyset pagination and filters, counts, the workers table."""

from __future__ import annotations

from tests.contract.helpers import at, enqueue_one, must_get, new_job, running_job
from tether.stores import Outcome, QueueCount, Store, WorkerInfo


def test_get_job_unknown_id_is_none(store: Store, t0: float) -> None:
    assert store.get_job(1) is None
    job_id = enqueue_one(store, t0)
    assert store.get_job(job_id + 1000) is None
    assert must_get(store, job_id).id == job_id


def test_list_jobs_keyset_pagination(store: Store, t0: float) -> None:
    ids = store.enqueue([new_job(f"t{i}") for i in range(25)], now=t0)
    pages: list[list[int]] = []
    after: int | None = None
    while True:
        page = [j.id for j in store.list_jobs(after_id=after, limit=10)]
        if not page:
            break
        pages.append(page)
        after = page[-1]
    assert [len(p) for p in pages] == [10, 10, 5]
    assert [i for p in pages for i in p] == ids
    assert [j.id for j in store.list_jobs(after_id=ids[4], limit=3)] == ids[5:8]
    assert store.list_jobs(after_id=ids[-1]) == []
    assert [j.id for j in store.list_jobs()] == ids
    assert store.list_jobs()[3] == must_get(store, ids[3])


def test_list_jobs_default_limit_is_100(store: Store, t0: float) -> None:
    ids = store.enqueue([new_job() for _ in range(120)], now=t0)
    assert [j.id for j in store.list_jobs()] == ids[:100]
    assert [j.id for j in store.list_jobs(after_id=ids[99])] == ids[100:]


def test_list_jobs_filters(store: Store, t0: float) -> None:
    ra = running_job(store, t0, queue="a")
    rb = running_job(store, t0, queue="b")
    a1 = enqueue_one(store, t0, queue="a")
    b1 = enqueue_one(store, t0, queue="b")
    a2 = enqueue_one(store, t0, queue="a")
    assert [j.id for j in store.list_jobs(status="running")] == [ra.id, rb.id]
    assert [j.id for j in store.list_jobs(status="pending")] == [a1, b1, a2]

    a_ids = [j.id for j in store.list_jobs(queue="a")]
    assert a_ids == sorted([a1, a2, ra.id])
    assert [j.id for j in store.list_jobs(queue="b")] == sorted([b1, rb.id])
    assert [j.id for j in store.list_jobs(status="running", queue="a")] == [ra.id]
    assert [j.id for j in store.list_jobs(status="pending", queue="b")] == [b1]
    assert store.list_jobs(status="done") == []
    assert store.list_jobs(queue="nope") == []
    assert [j.id for j in store.list_jobs(queue="a", after_id=a_ids[0], limit=1)] == a_ids[1:2]


def test_counts(store: Store, t0: float) -> None:
    assert [c for c in store.counts() if c.count] == []
    store.enqueue([new_job(queue="a") for _ in range(3)], now=t0)
    store.enqueue([new_job(queue="b") for _ in range(2)], now=t0)
    (x,) = store.claim("w1", ["b"], 1, 30, now=t0)
    store.finish([Outcome(x.lease, "done", result="1")], now=t0 + 1)
    store.claim("w1", ["a"], 2, 30, now=t0)
    got = {(c.queue, c.status): c.count for c in store.counts() if c.count}
    assert got == {("a", "pending"): 1, ("a", "running"): 2, ("b", "pending"): 1, ("b", "done"): 1}
    assert all(isinstance(c, QueueCount) for c in store.counts())


def test_register_list_unregister_workers(store: Store, t0: float) -> None:
    assert store.list_workers() == []
    w1 = WorkerInfo(id="w1", host="host-a", pid=101, queues=("default", "mail"), concurrency=4)
    w2 = WorkerInfo(id="w2", host="host-b", pid=202, queues=("default",), concurrency=1)
    store.register_worker(w1, now=t0)
    store.register_worker(w2, now=t0 + 1)
    workers = {w.id: w for w in store.list_workers()}
    assert set(workers) == {"w1", "w2"}
    got = workers["w1"]
    assert (got.host, got.pid, tuple(got.queues), got.concurrency) == (
        "host-a",
        101,
        ("default", "mail"),
        4,
    )
    assert got.started_at == at(t0)
    assert got.last_seen == at(t0)
    assert workers["w2"].started_at == at(t0 + 1)
    assert tuple(workers["w2"].queues) == ("default",)

    # registering again refreshes the row instead of adding one
    store.register_worker(w1, now=t0 + 10)
    workers = {w.id: w for w in store.list_workers()}
    assert len(workers) == 2
    assert workers["w1"].last_seen == at(t0 + 10)

    store.unregister_worker("w1")
    assert [w.id for w in store.list_workers()] == ["w2"]
    store.unregister_worker("w1")  # twice is harmless
    store.unregister_worker("never-registered")
    assert [w.id for w in store.list_workers()] == ["w2"]


def test_heartbeat_updates_last_seen(store: Store, t0: float) -> None:
    store.register_worker(
        WorkerInfo(id="w1", host="h", pid=1, queues=("default",), concurrency=1), now=t0
    )
    store.register_worker(
        WorkerInfo(id="w2", host="h", pid=2, queues=("default",), concurrency=1), now=t0
    )
    store.heartbeat("w1", [], 30, now=t0 + 7)
    seen = {w.id: w.last_seen for w in store.list_workers()}
    assert seen["w1"] == at(t0 + 7)
    assert seen["w2"] == at(t0), "only the beating worker is touched"
