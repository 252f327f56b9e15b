"""A Redis restart, with and without losing the data (issue #8, D), on a private server.

Without persistence a restart empties the server: job ids start again at 1. A worker still
holding attempt 1 of the *old* job 1 must not be able to touch the *new* job 1, even when
the same worker claimed it (same owner, same attempt number): the per-claim token fences it.
Every store that lived through the loss logs it at ERROR, and ``tether stats`` shows it.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys

import pytest

from tests.contract.helpers import transient
from tests.throwaway.redis import ThrowawayRedis
from tether._context import JobContext
from tether.stores import NewJob, Outcome
from tether.stores._redis.store import RedisStore

pytestmark = pytest.mark.timeout(60)
LOGGER = "tether.store.redis"


def _store(server: ThrowawayRedis, prefix: str = "app") -> RedisStore:
    store = RedisStore(f"{server.url}?prefix={prefix}")
    store.check_interval = 0.0  # look at the server on every claim/heartbeat (tests only)
    return store


def test_a_stale_claim_cannot_touch_a_new_job_with_the_same_id(server: ThrowawayRedis) -> None:
    store = _store(server)
    try:
        store.migrate()
        (old_id,) = store.enqueue([NewJob("t", payload='[["old"], {}]')])
        (old,) = store.claim("w1", ["default"], 1, 30)
        server.restart()  # no persistence: everything is gone, ids start again
        transient(store.migrate)
        (new_id,) = transient(lambda: store.enqueue([NewJob("t", payload='[["new"], {}]')]))
        assert new_id == old_id, "the id was reused (that is what makes this dangerous)"
        (new,) = transient(lambda: store.claim("w1", ["default"], 1, 30))
        assert (new.id, new.attempt, new.locked_by) == (old.id, old.attempt, old.locked_by)
        assert new.payload == '[["new"], {}]'
        # Issue 18, B: the dedup key of the new job is not the old one's.
        assert JobContext(new, store).dedup_key != JobContext(old, store).dedup_key

        assert store.heartbeat("w1", [old.lease], 30).lost == frozenset({old.lease})
        assert store.save_checkpoint(old.lease, '"stale"') is False
        stale = Outcome(old.lease, "done", result='"from the old job"')
        assert store.finish([stale]) == [old.lease], "a stale claim completed the new job"
        assert store.finish([Outcome(new.lease, "done", result='"fresh"')]) == []
        after = store.get_job(new_id)
        assert after is not None and (after.status, after.result) == ("done", '"fresh"')
    finally:
        store.close()


def test_data_loss_is_logged_by_every_store_and_shown_in_stats(
    server: ThrowawayRedis, caplog: pytest.LogCaptureFixture
) -> None:
    worker_a, worker_b = _store(server), _store(server)
    try:
        worker_a.migrate()
        worker_a.enqueue([NewJob("t")])
        worker_a.claim("wa", ["default"], 1, 30)  # both have seen the data before the loss
        worker_b.heartbeat("wb", [], 30)
        assert worker_a.info().extra["data_loss"] == "0"

        server.restart()
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger=LOGGER):
            transient(lambda: worker_a.claim("wa", ["default"], 1, 30))
            transient(lambda: worker_b.heartbeat("wb", [], 30))
        errors = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.ERROR]
        # Both stores noticed; this process says it once (a worker's fetcher, heartbeater and
        # maintainer stores all notice the same incident).
        assert worker_a._watch.noticed == ["data_loss"]
        assert worker_b._watch.noticed == ["data_loss"]
        assert len(errors) == 1, [r.getMessage() for r in caplog.records]
        assert "lost" in errors[0].getMessage() and "app" in errors[0].getMessage()
        # Once per incident: a later look logs nothing new.
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger=LOGGER):
            worker_a.claim("wa", ["default"], 1, 30)
        assert not [r for r in caplog.records if r.name == LOGGER]

        extra = worker_a.info().extra
        assert extra["data_loss"] == "1", "counted once although two stores noticed it"
        assert extra["restarts_seen"] == "1"
        assert float(extra["last_data_loss_at"]) > 0

        # And tether stats says so, in a fresh process that never saw the old data.
        stats = subprocess.run(
            [sys.executable, "-m", "tether._cli.main", "stats", "--url",
             f"{server.url}?prefix=app", "--json"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert stats.returncode == 0, stats.stderr
        report = json.loads(stats.stdout)
        assert report["store_info"]["data_loss"] == "1"
        assert any("lost" in w for w in report["warnings"])
    finally:
        worker_a.close()
        worker_b.close()


def test_a_restart_that_kept_the_data_is_logged_as_a_restart(
    server_aof: ThrowawayRedis, caplog: pytest.LogCaptureFixture
) -> None:
    store = _store(server_aof)
    try:
        store.migrate()
        (job_id,) = store.enqueue([NewJob("t")])
        store.heartbeat("w", [], 30)
        server_aof.restart(signal.SIGTERM)  # a clean shutdown writes the AOF
        with caplog.at_level(logging.ERROR, logger=LOGGER):
            transient(lambda: store.heartbeat("w", [], 30))
        messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
        assert len(messages) == 1 and "restarted" in messages[0], messages
        assert store.get_job(job_id) is not None
        extra = store.info().extra
        assert (extra["restarts_seen"], extra["data_loss"]) == ("1", "0")
    finally:
        store.close()
