"""The lean forms of issue 23 give back exactly what the full ones did: enqueue_many's array
literals carry any text, and the claim's row (which leaves out what the claim decided) is
the row ``get_job`` reads."""

from __future__ import annotations

from tether.stores import NewJob
from tether.stores._postgres.store import PostgresStore

AWKWARD = ['"', "\\", '\\"', "{}", "{", "}", ",", "NULL", "null", "", " ", "a b", "'",
           "é ü 漢字 🎉", "line\nbreak\ttab", '{"a": [1, "x,y"]}', "\\\\\\", '""']


def test_enqueue_many_keeps_every_character_of_text_fields(pg: PostgresStore) -> None:
    jobs = [NewJob(task=f"t{text}", payload=f'[["{i}"], {{}}]', queue=f"q{text}",
                   limit_key=text, priority=-i, max_attempts=i + 1, max_stalls=i + 2,
                   run_at=1.5e9 + i / 3)
            for i, text in enumerate(AWKWARD)]
    jobs.append(NewJob("t", payload='[["\\\\\\"", "{,}"], {"k": "NULL"}]', delay=0.25))
    ids = pg.enqueue(jobs)
    assert len(set(ids)) == len(jobs)
    for job_id, job in zip(ids, jobs, strict=True):
        got = pg.get_job(job_id)
        assert got is not None
        assert (got.task, got.payload, got.queue, got.limit_key, got.priority,
                got.max_attempts, got.max_stalls) == (
            job.task, job.payload, job.queue, job.limit_key, job.priority,
            job.max_attempts, job.max_stalls)
        if job.run_at is not None:
            assert abs(got.run_at - job.run_at) < 1e-6
        else:
            assert got.run_at >= got.created_at + 0.25 - 1e-6


def test_a_claimed_job_is_the_row_get_job_reads(pg: PostgresStore) -> None:
    ids = pg.enqueue([NewJob("t", payload='[["x"], {}]', limit_key="k", unique_key="u"),
                      NewJob("t", queue="default", priority=3)])
    claimed = pg.claim("w1", ["default"], 10, 30.0, request_id="req:1")
    assert sorted(job.id for job in claimed) == sorted(ids)
    for job in claimed:
        assert job == pg.get_job(job.id)
        assert (job.status, job.locked_by, job.lease_token) == ("running", "w1",
                                                                 f"req:1:{job.id}")
    # A replay returns the same jobs, read back as they are now.
    again = pg.claim("w1", ["default"], 10, 30.0, request_id="req:1")
    assert again == [pg.get_job(job.id) for job in claimed]


def test_a_batch_that_differs_only_in_payload_keeps_each_one(pg: PostgresStore) -> None:
    """enqueue_shared (the payloads one array, the rest scalars) writes what enqueue_plain
    did: every payload in input order, the batch's values on every job; a replay of the call
    inserts nothing."""
    jobs = [NewJob("t", payload=f'[["{i}", {text!r}], {{}}]', queue="q,{", priority=-3,
                   limit_key='k"', max_attempts=4, max_stalls=2, delay=7.5)
            for i, text in enumerate(AWKWARD * 10)]
    ids = pg.enqueue(jobs, request_id="shared:1")
    assert len(set(ids)) == len(jobs) and ids == sorted(ids)
    assert pg.enqueue(jobs, request_id="shared:1") == ids
    for job_id, job in zip(ids, jobs, strict=True):
        got = pg.get_job(job_id)
        assert got is not None
        assert (got.task, got.payload, got.queue, got.limit_key, got.priority,
                got.max_attempts, got.max_stalls, got.status) == (
            "t", job.payload, "q,{", 'k"', -3, 4, 2, "pending")
        assert abs(got.run_at - got.created_at - 7.5) < 1e-6
    due = pg.enqueue([NewJob("t", run_at=1.0e9), NewJob("t", run_at=1.0e9)])
    assert [pg.get_job(i).run_at for i in due] == [1.0e9, 1.0e9]  # type: ignore[union-attr]
