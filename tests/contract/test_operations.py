"""Operations (issue #11): search_jobs (filters, newest first, keyset pages), purge, pause and
resume, forgetting dead workers, reading the leader. Runs on every store."""

from __future__ import annotations

import pytest

from tests.contract.helpers import at, enqueue_one, must_get, new_job, running_job
from tether.stores import JobFilter, Outcome, Store, WorkerInfo


def ids(jobs: list) -> list[int]:  # type: ignore[type-arg]
    return [j.id for j in jobs]


def test_search_newest_first_with_keyset_pages(store: Store, t0: float) -> None:
    made = store.enqueue([new_job(f"t{i % 3}", queue=f"q{i % 2}") for i in range(25)], now=t0)
    newest = list(reversed(made))
    pages: list[list[int]] = []
    cursor: int | None = None
    while True:
        page = ids(store.search_jobs(JobFilter(), cursor=cursor, limit=10))
        if not page:
            break
        pages.append(page)
        cursor = page[-1]
    assert [len(p) for p in pages] == [10, 10, 5]
    assert [i for p in pages for i in p] == newest
    assert ids(store.search_jobs(JobFilter(newest_first=False), limit=5)) == made[:5]
    assert ids(store.search_jobs(JobFilter(newest_first=False), cursor=made[4], limit=3)) == \
        made[5:8]
    assert store.search_jobs(JobFilter(), cursor=made[0]) == []
    assert store.search_jobs(JobFilter(), limit=1)[0] == must_get(store, made[-1])


def test_search_filters_combine(store: Store, t0: float) -> None:
    made = store.enqueue([new_job(f"t{i % 3}", queue=f"q{i % 2}") for i in range(12)], now=t0)
    late = store.enqueue([new_job("t0", queue="q0")], now=t0 + 100)
    want = [i for n, i in enumerate(made) if n % 3 == 0 and n % 2 == 0]
    found = store.search_jobs(JobFilter(task="t0", queue="q0"), limit=100)
    assert ids(found) == list(reversed([*want, *late]))
    assert ids(store.search_jobs(JobFilter(task="t0", queue="q0", since=t0 + 50))) == late
    assert store.search_jobs(JobFilter(task="nope")) == []
    job = running_job(store, t0, queue="q9")
    assert ids(store.search_jobs(JobFilter(status="running"))) == [job.id]
    # the same row as get_job, every field (a store adding a column must add it here too)
    assert store.search_jobs(JobFilter(status="running")) == [must_get(store, job.id)]
    assert ids(store.search_jobs(JobFilter(status="pending", queue="q1"),
                                 limit=2)) == [made[11], made[9]]


def test_search_with_a_rare_task_scans_past_many_others(store: Store, t0: float) -> None:
    first = enqueue_one(store, t0, task="rare")
    store.enqueue([new_job("common") for _ in range(700)], now=t0)
    last = enqueue_one(store, t0, task="rare")
    assert ids(store.search_jobs(JobFilter(task="rare"), limit=10)) == [last, first]


@pytest.mark.parametrize("limit", [0, -1, 10_001])
def test_search_refuses_bad_page_sizes(store: Store, limit: int) -> None:
    with pytest.raises(ValueError, match="limit"):
        store.search_jobs(JobFilter(), limit=limit)


def test_purge_deletes_only_the_queue_and_states_asked(store: Store, t0: float) -> None:
    keep_other = enqueue_one(store, t0, queue="other")
    held = running_job(store, t0, queue="p")
    done = running_job(store, t0, queue="p")
    store.finish([Outcome(done.lease, "done", result="1")], now=t0 + 1)
    pending = store.enqueue([new_job(queue="p", unique_key=f"k{i}") for i in range(3)], now=t0)
    assert store.purge("p", ["pending"]) == 3
    assert all(store.get_job(i) is None for i in pending)
    assert must_get(store, held.id).status == "running"
    assert must_get(store, done.id).status == "done"
    assert must_get(store, keep_other).status == "pending"
    # the unique keys of purged jobs are free again
    again = store.enqueue([new_job(queue="p", unique_key="k0")], now=t0 + 2)
    assert again[0] not in pending
    assert store.purge("p", ["done", "pending"]) == 2
    assert store.get_job(done.id) is None and store.get_job(again[0]) is None
    assert store.purge("p", ["failed", "cancelled"]) == 0
    assert store.purge("nothing-here", ["pending"]) == 0
    counts = {(c.queue, c.status): c.count for c in store.counts() if c.count}
    assert counts == {("other", "pending"): 1, ("p", "running"): 1}


def test_purge_refuses_running_and_bad_names(store: Store) -> None:
    with pytest.raises(ValueError, match="running"):
        store.purge("q", ["running"])
    with pytest.raises(ValueError):
        store.purge("", ["pending"])


def test_purge_goes_past_one_batch(store: Store, t0: float) -> None:
    store.enqueue([new_job(queue="big") for _ in range(1200)], now=t0)
    assert store.purge("big", ["pending"]) == 1200
    assert store.search_jobs(JobFilter(queue="big")) == []


def test_pause_and_resume(store: Store) -> None:
    assert store.paused_queues() == []
    assert store.pause_queue("b") is True
    assert store.pause_queue("a") is True
    assert store.pause_queue("a") is False
    assert store.paused_queues() == ["a", "b"]
    assert store.resume_queue("a") is True
    assert store.resume_queue("a") is False
    assert store.paused_queues() == ["b"]
    with pytest.raises(ValueError):
        store.pause_queue("")


def test_delete_dead_workers(store: Store, t0: float) -> None:
    store.register_worker(WorkerInfo("old", "h", 1, ("q",), 1), now=t0 - 90_000)
    store.register_worker(WorkerInfo("fresh", "h", 2, ("q",), 1), now=t0 - 10)
    assert store.delete_dead_workers(86_400, now=t0) == 1
    assert [w.id for w in store.list_workers()] == ["fresh"]
    assert store.delete_dead_workers(86_400, now=t0) == 0


def test_leader_reads_the_current_holder(store: Store, t0: float) -> None:
    assert store.leader("m", now=t0) is None
    got = store.leader_acquire("m", "w1", 10, now=t0)
    assert got is not None
    seen = store.leader("m", now=t0 + 1)
    assert seen is not None and (seen.holder, seen.term) == ("w1", got.term)
    assert seen.expires_at == at(t0 + 10)
    assert store.leader("m", now=t0 + 11) is None  # expired
    assert store.leader_release("m", "w1", got.term)
    assert store.leader("m", now=t0 + 1) is None
