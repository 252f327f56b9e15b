"""Redis specifics of #12's completion notifications."""

from __future__ import annotations

import redis

from tether.stores import NewJob, Outcome
from tether.stores._redis.store import RedisStore


def test_the_done_channel_is_subscribed_only_while_someone_waits(
    rstore: RedisStore, raw: redis.Redis, prefix: str
) -> None:
    """A worker that never waits for results does not receive the fleet's finishes."""
    rstore.wait_for_jobs(["default"], 0.01)  # the subscription runs, as on every idle worker
    assert raw.pubsub_numsub(f"{prefix}:done") == [(f"{prefix}:done", 0)]
    job_id = rstore.enqueue([NewJob("t")])[0]
    assert rstore.wait_for_finish([job_id], 0.2) is False
    assert raw.pubsub_numsub(f"{prefix}:done") == [(f"{prefix}:done", 1)]


def test_one_message_per_finish_script(rstore: RedisStore, raw: redis.Redis, prefix: str) -> None:
    rstore.enqueue([NewJob("t", queue="m") for _ in range(3)])
    jobs = rstore.claim("w1", ["m"], 3, 30)
    pubsub = raw.pubsub()
    pubsub.subscribe(f"{prefix}:done")
    assert pubsub.get_message(timeout=1)["type"] == "subscribe"
    outcomes = [Outcome(jobs[0].lease, "done", result="1"),
                Outcome(jobs[1].lease, "error", error="retry me"),
                Outcome(jobs[2].lease, "dead", error="fatal")]
    assert rstore.finish(outcomes) == []
    message = pubsub.get_message(timeout=2)
    assert message is not None and message["data"] == f"{jobs[0].id},{jobs[2].id}"
    assert pubsub.get_message(timeout=0.3) is None
    pubsub.close()
