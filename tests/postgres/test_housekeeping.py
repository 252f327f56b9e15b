"""PostgreSQL housekeeping: churn past the threshold is vacuumed, and claims stop walking
past the dead entries every claimed job leaves at the front of the claim index."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import psycopg
import pytest

from tether.stores import NewJob, Outcome
from tether.stores._postgres.statements import for_schema
from tether.stores._postgres.store import PostgresStore

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def pg(scratch_db: str) -> Iterator[tuple[PostgresStore, str]]:
    """A store on a database of its own: VACUUM keeps every dead row that a snapshot open in
    the same database might still see, so another test's open transaction (tests run in
    parallel) would keep the churn below from being vacuumed."""
    store = PostgresStore(scratch_db + "?schema=tether", vacuum_threshold=2_000)
    store.migrate()
    try:
        yield store, store.schema
    finally:
        store.close()


def _dsn(store: PostgresStore) -> str:
    return store.url.split("?", 1)[0]


def claim_index_pages(store: PostgresStore, schema: str) -> int:
    """Buffers the claim's index scan touches: grows with dead entries, not with live work."""
    claim = for_schema(schema)["claim"].encode()
    with psycopg.connect(_dsn(store), autocommit=True) as conn, \
            conn.transaction(force_rollback=True):
        plan = conn.execute(
            b"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + claim,
            {"now": None, "queue": "default", "limit": 10, "owner": "x", "ttl": 30.0,
             "nonce": "x" * 32, "request": None},
        ).fetchone()
    assert plan is not None
    text = json.dumps(plan[0])
    match = re.search(r'"Index Name": "jobs_claim_idx".*?"Shared Hit Blocks": (\d+)', text)
    assert match, text[:500]
    return int(match.group(1))


def test_below_threshold_does_nothing(pg: tuple[PostgresStore, str]) -> None:
    store, _ = pg
    store.enqueue([NewJob("t") for _ in range(10)])
    assert store.housekeeping() is None


@pytest.mark.slow
def test_churn_is_vacuumed_and_claims_stay_short(pg: tuple[PostgresStore, str]) -> None:
    store, schema = pg
    store.enqueue([NewJob("t") for _ in range(30_000)])
    claimed = 0
    while claimed < 20_000:
        jobs = store.claim("w", ["default"], 200, 30)
        store.finish([Outcome(j.lease, "done") for j in jobs])
        claimed += len(jobs)
    bloated = claim_index_pages(store, schema)
    deadline = time.monotonic() + 30  # the server flushes its statistics about once a second
    done = store.housekeeping()
    while done is None and time.monotonic() < deadline:
        time.sleep(0.2)
        done = store.housekeeping()
    assert done is not None and "vacuumed" in done
    after = claim_index_pages(store, schema)
    assert after * 5 < bloated, (bloated, after)
    assert store.counts()  # the store still answers; no job was touched


def test_request_records_older_than_a_day_are_deleted(pg: tuple[PostgresStore, str]) -> None:
    store, schema = pg
    [old] = store.enqueue([NewJob("t")], request_id="old-request")
    [new] = store.enqueue([NewJob("t")], request_id="new-request")
    with psycopg.connect(_dsn(store), autocommit=True) as conn:
        conn.execute(f'UPDATE "{schema}".requests SET created_at = now() - interval \'25 hours\' '
                     "WHERE id = 'old-request'")
    assert store.housekeeping() == "deleted 1 request record(s)"
    assert store.housekeeping() is None
    # The recent record still answers a replay; the old one no longer does.
    assert store.enqueue([NewJob("t")], request_id="new-request") == [new]
    assert store.enqueue([NewJob("t")], request_id="old-request") != [old]
    assert len(store.list_jobs()) == 3
