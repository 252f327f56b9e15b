"""The dedup key names one attempt of one job, never two (issue 18, B).

Ids come from a counter (a sequence, AUTOINCREMENT, INCR) that can hand an id out again when
the store loses rows: a failover to an asynchronous standby, a Redis restart without
persistence. ``(id, attempt)`` alone then names two different jobs and a handler that dedups
on it silently skips the new one. Every job carries ``uid``, random and never reused, written
at enqueue, and the dedup key is ``"<id>:<attempt>:<uid>"``: the id and attempt stay readable
at its start.
"""

from __future__ import annotations

from tests.contract.helpers import TTL, fresh_queue, must_get, new_job
from tether._context import JobContext
from tether.stores import Outcome, Store


def test_every_job_has_a_uid_of_its_own_that_never_changes(store: Store, t0: float) -> None:
    queue = fresh_queue()
    batch = store.enqueue([new_job(queue=queue) for _ in range(3)], now=t0)
    single = store.enqueue([new_job(queue=queue)], now=t0)
    ids = [*batch, *single]
    uids = {job_id: must_get(store, job_id).uid for job_id in ids}
    assert all(len(uid) >= 32 for uid in uids.values()), uids  # 128 random bits, as text
    assert len(set(uids.values())) == len(ids), "two jobs share a uid"

    claimed = store.claim("w1", [queue], 10, TTL, now=t0 + 1)
    assert {j.id: j.uid for j in claimed} == uids, "the claim returns the enqueued uid"
    listed = {j.id: j.uid for j in store.list_jobs(queue=queue)}
    assert listed == uids
    store.finish([Outcome(j.lease, "done", result="1") for j in claimed], now=t0 + 2)
    assert {job_id: must_get(store, job_id).uid for job_id in ids} == uids


def test_dedup_keys_are_distinct_across_jobs_and_attempts(store: Store, t0: float) -> None:
    queue = fresh_queue()
    ids = store.enqueue([new_job(queue=queue) for _ in range(4)], now=t0)
    keys: dict[str, tuple[int, int]] = {}
    for n in range(1, 4):  # three attempts of every job
        claimed = store.claim("w1", [queue], 10, TTL, now=t0 + n * 10)
        assert sorted(j.id for j in claimed) == sorted(ids)
        for job in claimed:
            key = JobContext(job, store).dedup_key
            assert key not in keys, f"{key} names {keys.get(key)} and {(job.id, job.attempt)}"
            keys[key] = (job.id, job.attempt)
            job_id, attempt, rest = key.split(":", 2)
            assert (int(job_id), int(attempt)) == (job.id, job.attempt) == (job.id, n)
            assert rest == job.uid, "the part after (id, attempt) is the job's uid"
            assert key == f"{job.id}:{job.attempt}:{job.uid}"
        store.finish([Outcome(j.lease, "released") for j in claimed], now=t0 + n * 10 + 1)
    assert len(keys) == 12
