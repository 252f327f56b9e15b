"""Death detection behind a transaction pooler (issue #22 with issue #18's ``pooler=``).

A session advisory lock cannot live behind PgBouncer in transaction mode: the next client
gets the server connection. With ``direct=`` the token goes on the direct session connection
and death is detected as in session mode; without it the store gives the "no liveness" answer
(the lease alone decides, and the worker says so once at start).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.crash.harness import wait_for
from tests.pg_template import clone_for_url
from tests.throwaway.pgbouncer import Bouncer, pgbouncer
from tether.stores import NewJob
from tether.stores._postgres.store import PostgresStore

DIRECT = "&direct=127.0.0.1:5432"


@pytest.fixture(scope="module")
def tx_bouncer() -> Iterator[Bouncer]:
    with pgbouncer("transaction", pool_size=3) as bouncer:
        yield bouncer


def test_without_a_session_connection_the_lease_alone_decides(
    pg_url: str, tx_bouncer: Bouncer
) -> None:
    clone_for_url(pg_url)
    store = PostgresStore(tx_bouncer.url(pg_url) + "&pooler=transaction")
    try:
        assert store.capabilities.detects_death is False
        assert "direct=" in store.capabilities.liveness_why_not
        assert store.take_liveness("w-pooled") is False
        assert store.dead_owners(["maintenance"]).workers == ()
        assert store.dead_workers(["w-pooled"]) == frozenset()
        assert store.reap_dead(["w-pooled"]) == []
    finally:
        store.close()


def test_with_direct_the_token_lives_on_the_session_connection(
    pg_url: str, tx_bouncer: Bouncer
) -> None:
    clone_for_url(pg_url)
    store = PostgresStore(tx_bouncer.url(pg_url) + "&pooler=transaction" + DIRECT)
    worker = f"w-{uuid.uuid4().hex[:8]}"
    try:
        assert store.capabilities.detects_death is True
        assert store.take_liveness(worker) is True
        (job_id,) = store.enqueue([NewJob("t", queue="lq")])
        (job,) = store.claim(worker, ["lq"], 1, 3600)
        assert store.dead_owners().workers == ()
        store.release_liveness(worker)
        wait_for(lambda: worker in store.dead_owners().workers, 30, "the death seen")
        assert [r.job_id for r in store.reap_dead([worker])] == [job.id] == [job_id]
    finally:
        store.close()


def test_a_worker_says_once_that_the_lease_alone_decides(
    pg_url: str, tx_bouncer: Bouncer, caplog: pytest.LogCaptureFixture
) -> None:
    from tether._maintenance.deathwatch import take_token

    clone_for_url(pg_url)
    store = PostgresStore(tx_bouncer.url(pg_url) + "&pooler=transaction")
    try:
        with caplog.at_level("INFO", logger="tether.deathwatch"):
            assert take_token(store, "w-1", check_every=0.25, lease_ttl=60) is False
        (line,) = [r.getMessage() for r in caplog.records if "death detection" in r.getMessage()]
        assert "direct=" in line and "lease_ttl=60s" in line
    finally:
        store.close()
