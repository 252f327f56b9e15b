"""enqueue_many's shared-values statement (issue 23): a batch whose jobs differ only in their
payloads goes in as one INSERT ... SELECT FROM json_each, and gives back exactly what the
per-job executemany did: every payload, in input order, with the batch's values."""

from __future__ import annotations

from tether.stores import NewJob
from tether.stores._sqlite.store import SQLiteStore

AWKWARD = ['"', "\\", '\\"', "{}", "", " ", "'", "é ü 漢字 🎉", "line\nbreak\ttab\x01",
           '{"a": [1, "x,y"]}', "\\u0041", '""']


def test_a_shared_batch_keeps_every_payload_in_order(sqlite_store: SQLiteStore) -> None:
    jobs = [NewJob("t", payload=f'[[{i}, "{text}"], {{}}]', queue="q", priority=-2,
                   limit_key="k", max_attempts=4, max_stalls=2, delay=5.0)
            for i, text in enumerate(AWKWARD * 20)]
    ids = sqlite_store.enqueue(jobs)
    assert ids == list(range(ids[0], ids[0] + len(jobs)))
    for job_id, job in zip(ids, jobs, strict=True):
        got = sqlite_store.get_job(job_id)
        assert got is not None
        assert (got.task, got.payload, got.queue, got.limit_key, got.priority,
                got.max_attempts, got.max_stalls, got.status) == (
            "t", job.payload, "q", "k", -2, 4, 2, "pending")
        assert abs(got.run_at - (got.created_at + 5.0)) < 1e-6


def test_a_batch_with_differing_values_keeps_each_jobs_own(sqlite_store: SQLiteStore) -> None:
    jobs = [NewJob("t", payload=f"[[{i}], {{}}]", priority=i % 3, run_at=1.5e9 + i,
                   limit_key=None if i % 2 else str(i)) for i in range(7)]
    ids = sqlite_store.enqueue(jobs)
    for job_id, job in zip(ids, jobs, strict=True):
        got = sqlite_store.get_job(job_id)
        assert got is not None
        assert (got.payload, got.priority, got.limit_key, got.run_at) == (
            job.payload, job.priority, job.limit_key, job.run_at)


def test_a_replayed_shared_batch_inserts_nothing(sqlite_store: SQLiteStore) -> None:
    jobs = [NewJob("t", payload=f"[[{i}], {{}}]") for i in range(5)]
    first = sqlite_store.enqueue(jobs, request_id="r1")
    assert sqlite_store.enqueue(jobs, request_id="r1") == first
    assert sqlite_store.enqueue(jobs[:1] * 2) == [first[-1] + 1, first[-1] + 2]
