"""The claim's positional reply (issue #23): claim.lua and claim_flow.lua send each job as a
flat row without the fields the claim wrote, and the store fills those in. Whatever the claim
returns must be exactly the record a read of the job gives right after, for a job that carries
every optional field, on the first claim, on a later attempt and on a replay."""

from __future__ import annotations

import json

from tether.stores import NewJob, Outcome
from tether.stores._contract import FlowLimit
from tether.stores._redis.store import RedisStore

ODD = 'bad \x01 tab\t nl\n quote" back\\ é 😀 \u2028 end'


def _full_job(rstore: RedisStore, queue: str) -> int:
    """A job with every optional field set, failed once and due again at once."""
    [job_id] = rstore.enqueue(
        [
            NewJob(
                "t",
                payload=json.dumps([["é"], {}]),
                queue=queue,
                priority=-3,
                unique_key="u-é",
                limit_key="k é",
            )
        ]
    )
    [job] = rstore.claim("w1", [queue], 1, 60)
    assert rstore.save_checkpoint(job.lease, '{"at": "é"}')
    assert rstore.set_progress(job.lease, '{"done": 1}')
    assert rstore.finish([Outcome(job.lease, "snoozed", retry_delay=0.0)]) == []
    [job] = rstore.claim("w1", [queue], 1, 60)
    assert rstore.finish([Outcome(job.lease, "error", error=ODD, reason="why é")]) == []
    return job_id


def test_a_claimed_job_is_the_record_a_read_gives(rstore: RedisStore) -> None:
    job_id = _full_job(rstore, "full")
    [job] = rstore.claim("w2", ["full"], 1, 60, request_id="claim-1")
    assert job == rstore.get_job(job_id)
    assert (job.status, job.attempt, job.locked_by, job.failures, job.snoozes) == (
        "running",
        3,
        "w2",
        1,
        1,
    )
    assert job.last_error is not None and "quote" in job.last_error
    # a replay of the same claim answers the same jobs, with the same fields
    assert rstore.claim("w2", ["full"], 1, 60, request_id="claim-1") == [job]


def test_a_job_claimed_under_flow_limits_is_the_record_a_read_gives(
    rstore: RedisStore,
) -> None:
    job_id = _full_job(rstore, "flow")
    flow = [FlowLimit("task", "t", concurrency=5, per_key=True)]
    [job] = rstore.claim("w3", ["flow"], 1, 60, flow=flow, request_id="claim-2")
    assert job == rstore.get_job(job_id)
    assert rstore.claim("w3", ["flow"], 1, 60, flow=flow, request_id="claim-2") == [job]


def test_a_finish_keeps_odd_text_byte_for_byte(rstore: RedisStore) -> None:
    """finish.lua reads its outcomes from one JSON argument: every text arrives unchanged."""
    a, b = rstore.enqueue([NewJob("t", queue="odd"), NewJob("t", queue="odd")])
    j1, j2 = rstore.claim("w1", ["odd"], 2, 60)
    result = '{"k": "é😀\\u0000\\n", "n": 1.5}'
    outcomes = [
        Outcome(j1.lease, "done", result=result),
        Outcome(j2.lease, "dead", error=ODD, reason="why é"),
    ]
    assert rstore.finish(outcomes) == []
    assert rstore.finish(outcomes) == [], "a replay is recognised, not rejected"
    done, failed = rstore.get_job(a), rstore.get_job(b)
    assert done is not None and done.result == result
    assert failed is not None and failed.status == "failed"
    assert failed.failure_reason == "why é"
    assert json.loads(failed.errors)[-1]["error"] == failed.last_error
