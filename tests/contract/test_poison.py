"""Poison text through every text field, on every store (issue #8, A).

NUL, lone surrogates (a non-UTF-8 file name from ``os.listdir``), emoji and very long strings
must never make a store raise a driver error, kill a worker or block a queue. Error text is
stored cleaned (``tether._text.clean_error``), identically everywhere; JSON text fields carry
what JSON text can carry exactly, and a lone surrogate in them is refused with TypeError.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import POISON
from tests.contract.helpers import TTL, claim_one, errors_of, fresh_queue, must_get, running_job
from tether import _payload as payload
from tether._text import clean_error
from tether.stores import NewJob, Outcome, Store


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_error_text_is_stored_cleaned_and_reads_back_identically(
    store: Store, t0: float, poison: str
) -> None:
    job = running_job(store, t0, max_attempts=5)
    out = Outcome(job.lease, "error", error=poison, reason="error", retry_delay=1)
    assert store.finish([out], now=t0 + 1) == []
    after = must_get(store, job.id)
    expected = clean_error(poison)
    assert after.last_error == expected
    assert errors_of(after)[-1]["error"] == expected
    assert "\x00" not in expected and _encodable(expected)
    # The queue is not blocked: the job is claimed and listed again.
    again = claim_one(store, "w2", job.queue, t0 + 5)
    assert again.id == job.id
    assert any(j.id == job.id for j in store.list_jobs(limit=100))


def test_poison_in_a_dead_letter_and_a_stale_batch_neighbour(
    store: Store, t0: float, poison: str
) -> None:
    a = running_job(store, t0)
    b = running_job(store, t0)
    outs = [Outcome(a.lease, "dead", error=poison, reason="error"),
            Outcome(b.lease, "done", result=payload.dumps("fine"))]
    assert store.finish(outs, now=t0 + 1) == []
    assert must_get(store, a.id).status == "failed"
    assert must_get(store, b.id).status == "done", "the other outcome of the batch landed"


@pytest.mark.parametrize("name", ["nul", "emoji", "long"])
def test_json_text_fields_round_trip_exactly(store: Store, t0: float, name: str) -> None:
    value = {"text": POISON[name], "list": [POISON[name]]}
    text = payload.dumps(value)
    q = fresh_queue()
    [job_id] = store.enqueue([NewJob(task="t", payload=payload.dumps([[value], {}]), queue=q)],
                             now=t0)
    job = claim_one(store, "w1", q, t0)
    assert job.id == job_id
    assert json.loads(job.payload) == [[value], {}]
    assert store.save_checkpoint(job.lease, text, now=t0 + 1)
    assert store.set_progress(job.lease, text, now=t0 + 1)
    assert store.finish([Outcome(job.lease, "done", result=text)], now=t0 + 2) == []
    after = must_get(store, job.id)
    assert (after.result, after.checkpoint, after.progress) == (text, text, text)


@pytest.mark.parametrize("name", sorted(POISON))
def test_api_encoding_refuses_lone_surrogates_and_carries_the_rest(name: str) -> None:
    value = POISON[name]
    if _encodable(value):
        assert json.loads(payload.dumps(value)) == value
    else:
        with pytest.raises(TypeError, match="surrogate"):
            payload.dumps(value)


def test_names_with_emoji_and_at_the_limit_round_trip(store: Store, t0: float) -> None:
    q = "queue-\U0001f680"
    key = "key-\U0001f44d-" + "é" * 200
    task = "tasks.\U0001f680"
    [job_id] = store.enqueue([NewJob(task=task, queue=q, unique_key=key)], now=t0)
    job = claim_one(store, "w1", q, t0)
    assert (job.id, job.queue, job.unique_key, job.task) == (job_id, q, key, task)
    beat = store.heartbeat("w1", [job.lease], TTL, now=t0 + 1)
    assert beat.lost == frozenset()
    assert [c.queue for c in store.counts() if c.status == "running"] == [q]
