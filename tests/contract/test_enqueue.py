"""enqueue: ids, batches, payload text, due times, unique keys, the store's own clock."""

from __future__ import annotations

import json

from tests.contract.helpers import (
    TTL,
    at,
    claim_one,
    enqueue_one,
    fresh_queue,
    must_get,
    new_job,
    running_job,
)
from tether.stores import Lease, NewJob, Outcome, Store


def test_enqueue_returns_ids_in_input_order(store: Store, t0: float) -> None:
    first = store.enqueue([new_job("a")], now=t0)
    batch = store.enqueue([new_job("b"), new_job("c"), new_job("d")], now=t0 + 1)
    ids = first + batch
    assert len(ids) == 4
    assert len(set(ids)) == 4
    assert ids == sorted(ids), "ids must grow in enqueue order"
    assert [must_get(store, i).task for i in ids] == ["a", "b", "c", "d"]


def test_enqueue_empty_batch(store: Store, t0: float) -> None:
    assert store.enqueue([], now=t0) == []
    assert store.list_jobs() == []


def test_enqueue_batch_of_many_in_one_call(store: Store, t0: float) -> None:
    jobs = [new_job(f"task{i}", payload=json.dumps([[i], {}])) for i in range(100)]
    ids = store.enqueue(jobs, now=t0)
    assert len(ids) == 100
    assert ids == sorted(ids)
    for i, job_id in enumerate(ids):
        job = must_get(store, job_id)
        assert job.task == f"task{i}"
        assert json.loads(job.payload) == [[i], {}]
    assert [j.id for j in store.list_jobs(limit=1000)] == ids


def test_new_job_fields(store: Store, t0: float) -> None:
    job_id = enqueue_one(
        store,
        t0,
        "mod.fn",
        queue="mail",
        priority=-3,
        max_attempts=7,
        max_stalls=2,
        unique_key="k1",
    )
    job = must_get(store, job_id)
    assert job.id == job_id
    assert job.task == "mod.fn"
    assert job.queue == "mail"
    assert job.status == "pending"
    assert job.priority == -3
    assert job.max_attempts == 7
    assert job.max_stalls == 2
    assert job.unique_key == "k1"
    assert job.run_at == at(t0)
    assert job.created_at == at(t0)
    assert (job.attempt, job.failures, job.stall_count, job.interruptions) == (0, 0, 0, 0)
    assert job.locked_by is None
    assert job.lease_until is None
    assert job.started_at is None
    assert job.finished_at is None
    assert job.last_error is None
    assert job.failure_reason is None
    assert job.result is None
    assert job.checkpoint is None
    assert job.progress is None
    assert job.cancel_requested is False
    assert json.loads(job.errors) == []


def test_payload_round_trips_as_exact_text(store: Store, t0: float) -> None:
    # Odd spacing, key order, unicode and big numbers: the store must not re-encode the text.
    payload = '[[1,  "x", 1.5e300, null], {"z": {"b": [true, false]}, "a": "Ünïcødé ✓ 🚀"}]'
    job_id = enqueue_one(store, t0, payload=payload)
    assert must_get(store, job_id).payload == payload
    claimed = claim_one(store, "w1", "default", t0 + 1)
    assert claimed.payload == payload


def test_new_job_defaults(store: Store, t0: float) -> None:
    job = must_get(store, enqueue_one(store, t0))
    assert json.loads(job.payload) == [[], {}]
    assert (job.queue, job.priority, job.max_attempts, job.max_stalls) == ("default", 0, 5, 3)
    assert job.unique_key is None


def test_large_payload_round_trips(store: Store, t0: float) -> None:
    payload = json.dumps([["x" * 200_000, list(range(5000))], {"k": "\u00e9" * 1000}])
    job_id = enqueue_one(store, t0, payload=payload)
    assert must_get(store, job_id).payload == payload


def test_delay_makes_job_due_later(store: Store, t0: float) -> None:
    job_id = enqueue_one(store, t0, delay=30.0)
    assert must_get(store, job_id).run_at == at(t0 + 30)
    assert store.claim("w1", ["default"], 10, TTL, now=t0 + 29) == []
    assert must_get(store, job_id).status == "pending"
    assert [j.id for j in store.claim("w1", ["default"], 10, TTL, now=t0 + 31)] == [job_id]


def test_run_at_makes_job_due_then(store: Store, t0: float) -> None:
    job_id = enqueue_one(store, t0, run_at=t0 + 50, delay=5.0)  # run_at wins over delay
    assert must_get(store, job_id).run_at == at(t0 + 50)
    assert store.claim("w1", ["default"], 10, TTL, now=t0 + 49) == []
    assert [j.id for j in store.claim("w1", ["default"], 10, TTL, now=t0 + 51)] == [job_id]


def test_run_at_in_the_past_is_due_now(store: Store, t0: float) -> None:
    job_id = enqueue_one(store, t0, run_at=t0 - 100)
    assert must_get(store, job_id).run_at == at(t0 - 100)
    assert [j.id for j in store.claim("w1", ["default"], 10, TTL, now=t0)] == [job_id]


def test_unique_key_returns_existing_pending_job(store: Store, t0: float) -> None:
    first = enqueue_one(store, t0, unique_key="report:1")
    again = enqueue_one(store, t0 + 1, unique_key="report:1", payload="[[2], {}]")
    assert again == first
    jobs = store.list_jobs()
    assert [j.id for j in jobs] == [first]
    assert jobs[0].payload == "[[], {}]", "the first job is kept as it was"
    other = enqueue_one(store, t0 + 2, unique_key="report:2")
    assert other != first


def test_unique_key_returns_existing_running_job(store: Store, t0: float) -> None:
    job = running_job(store, t0, unique_key="k")
    assert enqueue_one(store, t0 + 1, unique_key="k") == job.id
    assert len(store.list_jobs()) == 1
    assert must_get(store, job.id).status == "running"


def test_unique_key_is_free_again_after_the_job_is_terminal(store: Store, t0: float) -> None:
    done = running_job(store, t0, unique_key="k")
    assert store.finish([Outcome(done.lease, "done", result="1")], now=t0 + 1) == []

    second = enqueue_one(store, t0 + 2, unique_key="k")
    assert second != done.id
    assert must_get(store, second).status == "pending"
    assert must_get(store, done.id).status == "done"

    # cancelled frees the key too
    assert store.cancel(second, now=t0 + 3) == "cancelled"
    third = enqueue_one(store, t0 + 4, unique_key="k")
    assert third not in (done.id, second)

    # and failed
    queue = fresh_queue()
    failing = enqueue_one(store, t0 + 5, unique_key="f", queue=queue)
    lease: Lease = claim_one(store, "w1", queue, t0 + 5).lease
    assert store.finish([Outcome(lease, "dead", error="x", reason="error")], now=t0 + 6) == []
    assert must_get(store, failing).status == "failed"
    assert enqueue_one(store, t0 + 7, unique_key="f") != failing


def test_unique_key_spans_queues_and_tasks(store: Store, t0: float) -> None:
    first = enqueue_one(store, t0, "a", queue="q1", unique_key="k")
    assert enqueue_one(store, t0 + 1, "b", queue="q2", unique_key="k") == first
    assert [j.id for j in store.list_jobs()] == [first]


def test_duplicate_unique_key_within_one_batch(store: Store, t0: float) -> None:
    ids = store.enqueue(
        [
            NewJob("a", payload='[["first"], {}]', unique_key="dup"),
            NewJob("b"),
            NewJob("a", payload='[["second"], {}]', unique_key="dup"),
        ],
        now=t0,
    )
    assert len(ids) == 3
    assert ids[0] == ids[2]
    assert ids[1] != ids[0]
    jobs = store.list_jobs()
    assert sorted(j.id for j in jobs) == sorted({ids[0], ids[1]})
    assert must_get(store, ids[0]).payload == '[["first"], {}]', "the first occurrence wins"


def test_batch_hitting_an_existing_unique_key(store: Store, t0: float) -> None:
    existing = enqueue_one(store, t0, unique_key="k")
    ids = store.enqueue([NewJob("x"), NewJob("y", unique_key="k"), NewJob("z")], now=t0 + 1)
    assert ids[1] == existing
    assert len({ids[0], ids[2], existing}) == 3
    assert len(store.list_jobs()) == 3


def test_calls_without_now_use_the_store_clock(store: Store) -> None:
    before = store.now()
    job_id = store.enqueue([NewJob("t", delay=100.0)])[0]
    after = store.now()
    job = must_get(store, job_id)
    assert before - 0.01 <= job.created_at <= after + 0.01
    assert before + 100 - 0.01 <= job.run_at <= after + 100 + 0.01
    assert store.claim("w1", ["default"], 10, TTL) == []  # due in 100 s by the store's clock

    now_id = store.enqueue([NewJob("t", queue="now")])[0]
    claimed = store.claim("w1", ["now"], 10, TTL)
    after_claim = store.now()
    assert [j.id for j in claimed] == [now_id]
    lease_until = must_get(store, now_id).lease_until
    assert lease_until is not None
    assert before + TTL - 0.01 <= lease_until <= after_claim + TTL + 0.01
