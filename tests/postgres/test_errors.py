"""Driver errors never leave the store raw, and transient is told from permanent (issue #8, B).

``StoreUnavailable`` (retrying may help): connection trouble, a read-only node (a standby after
failover, SQLSTATE 25006), serialization failures, resources, shutdown. ``StoreError`` for
everything else, with one line of text: a producer that retries on StoreUnavailable must never
loop forever on a value that can never be stored.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.servers import PG_DSN
from tether import _limits as limits
from tether._errors import SchemaError, StoreError, StoreUnavailable
from tether.stores import Lease, NewJob, Outcome, WorkerInfo
from tether.stores._postgres.store import PostgresStore


def test_a_read_only_node_is_unavailable_for_every_write(scratch_db: str) -> None:
    """A standby after a failover refuses writes with SQLSTATE 25006: transient (the next
    connection may reach the new primary), so StoreUnavailable, never a raw driver error."""
    url = scratch_db + "?schema=tether"
    rw = PostgresStore(url)
    try:
        rw.migrate()
        [job_id] = rw.enqueue([NewJob("t", queue="ro")])
        [job] = rw.claim("w1", ["ro"], 1, 30)
    finally:
        rw.close()
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{scratch_db.rsplit("/", 1)[1]}" '
                      "SET default_transaction_read_only = on")
    ro = PostgresStore(url)
    try:
        writes: list[Callable[[], Any]] = [
            lambda: ro.enqueue([NewJob("t")]),
            lambda: ro.enqueue([NewJob("t"), NewJob("t", unique_key="k")]),
            lambda: ro.claim("w1", ["ro"], 1, 30),
            lambda: ro.heartbeat("w1", [job.lease], 30),
            lambda: ro.finish([Outcome(job.lease, "done", result="1")]),
            lambda: ro.save_checkpoint(job.lease, "1"),
            lambda: ro.set_progress(job.lease, "1"),
            ro.reap_expired,
            lambda: ro.cancel(job_id),
            lambda: ro.retry_failed(None),
            lambda: ro.leader_acquire("reaper", "a", 30),
            lambda: ro.register_worker(WorkerInfo("w", "h", 1, ("a",), 1)),
            lambda: ro.prune("done", 0),
            ro.migrate,
        ]
        for write in writes:
            with pytest.raises(StoreUnavailable, match="read-only"):
                write()
        # Reads still work on a standby; waiting for jobs never raises.
        assert ro.get_job(job_id) is not None
        ro.wait_for_jobs(["ro"], 0.05)
    finally:
        ro.close()


def test_a_value_the_driver_refuses_is_a_store_error_not_transient(pg: PostgresStore) -> None:
    # A NUL inside JSON text the API layer did not make (raw NUL is not JSON-escaped):
    # psycopg refuses it client side with DataError.
    with pytest.raises(StoreError) as caught:
        pg.enqueue([NewJob("t", payload='[["a\x00b"], {}]')])
    assert not isinstance(caught.value, StoreUnavailable)
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value.__cause__, psycopg.Error)


def test_an_index_row_too_large_is_permanent(pg: PostgresStore) -> None:
    """What a 5,000-character unique key did before limits.check_jobs refused it: SQLSTATE
    54000 (program_limit_exceeded) is an OperationalError in psycopg, and was reported as
    StoreUnavailable, so a producer retrying on StoreUnavailable looped forever. Sent here
    below the store's own checks, straight through its statement."""
    key = secrets.token_hex(4000)  # incompressible: larger than a btree entry can be
    params = {
        "now": None, "channel": pg.channel, "request_id": None, "tasks": ["t"],
        "payloads": ["[[], {}]"], "queues": ["default"], "priorities": [0],
        "run_ats": [None], "delays": [0.0], "max_attempts": [5], "max_stalls": [3],
        "unique_keys": [key], "limit_keys": [None], "jobs_key": 0, "gate": False,
    }
    with pytest.raises(StoreError) as caught:
        pg._rows("enqueue", params)
    assert not isinstance(caught.value, StoreUnavailable)
    assert "54000" in str(caught.value) or "index row" in str(caught.value)


@pytest.mark.parametrize("field", ["queue", "unique_key"])
def test_a_5000_character_name_is_refused_before_the_store(pg: PostgresStore, field: str) -> None:
    value = "x" * 5000
    with pytest.raises(ValueError, match=field) as caught:
        pg.enqueue([NewJob("t", **{field: value})])  # type: ignore[arg-type]
    assert str(limits.MAX_UNIQUE_KEY if field == "unique_key" else limits.MAX_NAME) in str(
        caught.value
    )


def test_a_unique_violation_is_never_raw(pg: PostgresStore) -> None:
    """Dead-letter retry of a job whose key a live job now holds raised a raw
    UniqueViolation; `tether dlq retry --all` then retried nothing."""
    pg.enqueue([NewJob("t", queue="u", unique_key="k")])
    [job] = pg.claim("w1", ["u"], 1, 30)
    pg.finish([Outcome(job.lease, "dead", error="x")])
    pg.enqueue([NewJob("t", queue="u", unique_key="k")])
    free = pg.enqueue([NewJob("t", queue="v")])[0]
    [other] = pg.claim("w1", ["v"], 1, 30)
    pg.finish([Outcome(other.lease, "dead", error="x")])
    result = pg.retry_failed(None)
    assert (result.retried, result.conflicts) == (1, (job.id,))
    assert pg.get_job(free).status == "pending"  # type: ignore[union-attr]


def test_a_users_own_error_inside_transaction_is_the_users(pg: PostgresStore) -> None:
    """`current_job().transaction()` said "tether tables are missing" for the user's own
    missing table; the user's statement errors are theirs to see, unchanged."""
    with pytest.raises(psycopg.errors.UndefinedTable) as caught, pg.transaction() as conn:
        conn.execute("SELECT * FROM no_such_table_of_the_user")
    assert "no_such_table_of_the_user" in str(caught.value)


def test_missing_tables_are_a_schema_error(open_pg: Callable[..., PostgresStore]) -> None:
    store = open_pg()
    calls: list[Callable[[], Any]] = [
        lambda: store.enqueue([NewJob("t")]),
        lambda: store.enqueue([NewJob("t", unique_key="k")], request_id="r"),
        lambda: store.claim("w", ["default"], 1, 30),
        lambda: store.heartbeat("w", [Lease(1, 1, "w", "x:1")], 30),
        lambda: store.finish([Outcome(Lease(1, 1, "w", "x:1"), "done")]),
        lambda: store.get_job(1),
    ]
    for call in calls:
        with pytest.raises(SchemaError, match="tether migrate"):
            call()
    assert store.info().schema_version == 0


def test_text_the_driver_cannot_encode_is_a_store_error(pg: PostgresStore) -> None:
    """A lone surrogate (a non-UTF-8 queue name from argv or os.listdir) in a parameter the
    API layer did not check made psycopg raise a raw UnicodeEncodeError."""
    for call in (
        lambda: pg.claim("w", ["a\udcffb"], 1, 30),
        lambda: pg.list_jobs(queue="a\udcffb"),
        lambda: pg.heartbeat("w\udcff", [], 30),
        lambda: pg.notify(["a\udcffb"]),
    ):
        with pytest.raises(StoreError) as caught:
            call()
        assert not isinstance(caught.value, StoreUnavailable)
