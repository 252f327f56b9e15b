"""Failover to an asynchronous standby that had not replayed the last commits (issue 18, B).

A real primary and its streaming standby (tests/throwaway/postgres.py). The standby stops
before the last enqueues (they are acknowledged by the primary, never replicated), the primary
is SIGKILLed and the standby promoted; the stores reach it through a multi-host URL with
``target_session_attrs=read-write``, as a production deployment does. The sequence of the new
primary is behind, so job ids are handed out again: the dedup key must still name one job,
and the loss must be logged at ERROR by every store that lived through it and shown by
``tether stats``.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from tests.contract.helpers import transient
from tests.throwaway.postgres import Replicated, replicated
from tether._context import JobContext
from tether.stores import NewJob, Outcome
from tether.stores._postgres.store import PostgresStore

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow, pytest.mark.crash,
              pytest.mark.serial]
LOGGER = "tether.store.postgres"
BEFORE, LOST, AFTER = 20, 100, 100


def _store(pair: Replicated) -> PostgresStore:
    # The default check interval (5 s): the look after a failover comes from the reconnection
    # itself, before the first statement on the new server.
    return PostgresStore(pair.url(), connect_timeout=2)


def _keys(store: PostgresStore, n: int) -> dict[str, int]:
    """Claim ``n`` jobs and finish them; their dedup keys."""
    keys: dict[str, int] = {}
    while len(keys) < n:
        claimed = store.claim("w1", ["default"], n, 30)
        assert claimed, f"only {len(keys)} of {n} jobs to claim"
        keys.update({JobContext(job, store).dedup_key: job.id for job in claimed})
        store.finish([Outcome(job.lease, "done", result="1") for job in claimed])
    return keys


def test_async_failover_that_lost_jobs(caplog: pytest.LogCaptureFixture) -> None:
    with replicated() as pair:
        worker, producer = _store(pair), _store(pair)
        try:
            worker.migrate()
            producer.enqueue([NewJob("t") for _ in range(BEFORE)])
            seen = _keys(worker, BEFORE)
            worker.heartbeat("w1", [], 30)  # the worker has looked at the server once
            pair.wait_caught_up()

            pair.standby.kill()  # it lags for good: what follows is never replicated
            lost_ids = [i for _ in range(LOST) for i in producer.enqueue([NewJob("t")])]
            seen.update(_keys(worker, LOST))
            pair.primary.kill()
            pair.standby.start()
            pair.promote()

            caplog.clear()
            with caplog.at_level(logging.WARNING, logger=LOGGER):
                new_ids = transient(lambda: producer.enqueue([NewJob("t") for _ in range(AFTER)]))
                after = transient(lambda: _keys(worker, AFTER))
                transient(lambda: worker.heartbeat("w1", [], 30))
            reused = set(new_ids) & set(lost_ids)
            assert reused, f"no id was handed out again: {new_ids[:3]}... vs {lost_ids[:3]}..."
            assert not set(after) & set(seen), "a dedup key names two different jobs"
            assert set(after.values()) & set(seen.values()), "ids repeat, keys do not"

            errors = [r.getMessage() for r in caplog.records
                      if r.name == LOGGER and r.levelno == logging.ERROR]
            assert errors and all("lost" in e for e in errors), errors
            assert len(errors) == 1, f"one ERROR line per process and incident: {errors}"
            assert worker._watch.noticed[-1:] == ["data_loss"]
            assert producer._watch.noticed[-1:] == ["data_loss"]
            extra = worker.info().extra
            assert extra["data_loss"] == "1", extra
            assert int(extra["failovers"]) >= 1

            stats = subprocess.run(
                [sys.executable, "-m", "tether._cli.main", "stats", "--url", pair.url(),
                 "--json"],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            assert stats.returncode == 0, stats.stderr
            report = json.loads(stats.stdout)
            assert report["store_info"]["data_loss"] == "1"
            assert any("lost" in w for w in report["warnings"]), report["warnings"]
        finally:
            worker.close()
            producer.close()


def test_failover_to_a_caught_up_standby_is_no_data_loss(
    caplog: pytest.LogCaptureFixture
) -> None:
    with replicated() as pair:
        store = _store(pair)
        try:
            store.migrate()
            ids = store.enqueue([NewJob("t") for _ in range(BEFORE)])
            store.heartbeat("w1", [], 30)
            pair.wait_caught_up()
            pair.primary.kill()
            pair.promote()
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger=LOGGER):
                new = transient(lambda: store.enqueue([NewJob("t")]))
                transient(lambda: store.heartbeat("w1", [], 30))
            assert new[0] > max(ids)
            records = [r for r in caplog.records if r.name == LOGGER]
            assert not [r for r in records if r.levelno >= logging.ERROR], \
                [r.getMessage() for r in records]
            assert any("failed over" in r.getMessage() for r in records), \
                [r.getMessage() for r in records]
            extra = store.info().extra
            assert (extra["data_loss"], extra["failovers"]) == ("0", "1"), extra
        finally:
            store.close()
