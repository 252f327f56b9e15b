"""SQLite-specific behaviour: URLs, pragmas, schema handling, error mapping, query plans."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tether._errors import ConfigError, SchemaError, StoreError, StoreUnavailable
from tether.stores import NewJob, Outcome, Store, open_store
from tether.stores._sqlite.connection import map_error
from tether.stores._sqlite.rows import Q
from tether.stores._sqlite.store import SCHEMA_VERSION, SQLiteStore
from tether.stores._sqlite.url import parse_url


def test_satisfies_the_store_protocol(db_url: str) -> None:
    store: Store = SQLiteStore(db_url)  # mypy --strict checks this assignment
    try:
        assert isinstance(store, Store)
        assert store.kind == "sqlite"
    finally:
        store.close()


def test_open_store_picks_sqlite(db_url: str) -> None:
    store = open_store(db_url, busy_timeout=1.0)
    try:
        assert isinstance(store, SQLiteStore)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///relative.db", "relative.db"),
        ("sqlite:///dir/relative.db", "dir/relative.db"),
        ("sqlite:////abs/path.db", "/abs/path.db"),
        ("SQLITE:////abs/with%20space.db", "/abs/with space.db"),
    ],
)
def test_url_paths(url: str, path: str) -> None:
    assert parse_url(url) == path


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://host/x.db",
        "sqlite:///",
        "sqlite:",
        "sqlite:x.db",
        "sqlite:///:memory:",
        "sqlite:///x.db?mode=ro",
        "postgresql:///x.db",
    ],
)
def test_malformed_urls_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError):
        SQLiteStore(url)


def test_relative_url_is_relative_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = SQLiteStore("sqlite:///rel.db")
    try:
        store.migrate()
    finally:
        store.close()
    assert (tmp_path / "rel.db").exists()


def test_wal_synchronous_and_busy_timeout(sqlite_store: SQLiteStore) -> None:
    seen: dict[str, object] = {}

    def probe() -> None:  # a fresh thread gets a fresh connection with the same settings
        conn = sqlite_store._db.get()
        seen["journal"] = conn.execute("PRAGMA journal_mode").fetchone()[0]
        seen["sync"] = conn.execute("PRAGMA synchronous").fetchone()[0]
        seen["busy"] = conn.execute("PRAGMA busy_timeout").fetchone()[0]
        seen["checkpoint"] = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    # checkpoint: 10,000 WAL pages, not SQLite's 1,000 (issue #10; docs/stores.md durability)
    assert seen == {"journal": "wal", "sync": 1, "busy": 30000, "checkpoint": 10000}
    assert sqlite_store.info().extra["journal_mode"] == "wal"


def test_info(sqlite_store: SQLiteStore, db_url: str) -> None:
    info = sqlite_store.info()
    assert (info.kind, info.url, info.schema_version) == ("sqlite", db_url, SCHEMA_VERSION)
    assert info.extra["sqlite_version"] == sqlite3.sqlite_version


def test_clock_is_sqlite_time(sqlite_store: SQLiteStore) -> None:
    a = sqlite_store.now()
    b = sqlite_store.now()
    assert 1_600_000_000 < a <= b < a + 5


def test_migrate_is_idempotent(make_store: Callable[..., SQLiteStore]) -> None:
    store = make_store()
    assert store.migrate() == SCHEMA_VERSION
    job_id = store.enqueue([NewJob("t")])[0]
    assert store.migrate() == SCHEMA_VERSION
    assert make_store().migrate() == SCHEMA_VERSION
    store.check_schema()
    assert store.get_job(job_id) is not None


def test_missing_schema(make_store: Callable[..., SQLiteStore]) -> None:
    store = make_store()
    with pytest.raises(SchemaError):
        store.check_schema()
    with pytest.raises(SchemaError) as info:  # "no such table" maps to SchemaError
        store.get_job(1)
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)


def test_newer_schema_is_refused(sqlite_store: SQLiteStore, tmp_path: Path) -> None:
    raw = sqlite3.connect(tmp_path / "tether.db")
    raw.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, 0)", (99,))
    raw.commit()
    raw.close()
    with pytest.raises(SchemaError):
        sqlite_store.check_schema()
    with pytest.raises(SchemaError):
        sqlite_store.migrate()


def test_locked_database_is_store_unavailable(
    make_store: Callable[..., SQLiteStore], tmp_path: Path
) -> None:
    store = make_store(busy_timeout=0.05)
    store.migrate()
    job_id = store.enqueue([NewJob("t")])[0]
    raw = sqlite3.connect(tmp_path / "tether.db", isolation_level=None)
    try:
        raw.execute("BEGIN IMMEDIATE")  # hold the write lock
        with pytest.raises(StoreUnavailable) as info:
            store.enqueue([NewJob("t")])
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        with pytest.raises(StoreUnavailable):
            store.claim("w", ["default"], 1, 30.0)
        # WAL: readers are not blocked by the writer.
        job = store.get_job(job_id)
        assert job is not None
        assert job.status == "pending"
        raw.execute("ROLLBACK")
    finally:
        raw.close()
    assert len(store.claim("w", ["default"], 10, 30.0)) == 1  # usable again afterwards


def test_close_closes_every_thread_connection(make_store: Callable[..., SQLiteStore]) -> None:
    store = make_store()
    store.migrate()
    conns: list[sqlite3.Connection] = []

    def use() -> None:
        store.get_job(1)
        conns.append(store._db.get())

    threads = [threading.Thread(target=use) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    for conn in conns:
        with pytest.raises(sqlite3.ProgrammingError):
            conn.execute("SELECT 1")
    with pytest.raises(StoreError):
        store.get_job(1)


def test_duplicate_outcomes_in_one_batch(sqlite_store: SQLiteStore) -> None:
    t0 = sqlite_store.now()
    sqlite_store.enqueue([NewJob("t", queue="dup")], now=t0)
    (job,) = sqlite_store.claim("w", ["dup"], 1, 30.0, now=t0)
    stale = type(job.lease)(job.id, job.attempt + 5, "w")
    # The stale one first: the valid one (later in the batch) still applies.
    rejected = sqlite_store.finish(
        [
            Outcome(stale, "done", result="1"),
            Outcome(job.lease, "done", result="2"),
            Outcome(job.lease, "error", error="late"),
        ],
        now=t0 + 1,
    )
    assert rejected == [stale, job.lease]
    after = sqlite_store.get_job(job.id)
    assert after is not None
    assert (after.status, after.result, after.failures) == ("done", "2", 0)
    assert json.loads(after.errors) == []


def test_a_finished_attempts_token_from_another_owner_is_no_replay(
    sqlite_store: SQLiteStore,
) -> None:
    """Session 10's defect, on the file itself: after the holder's finish applied, the same
    attempt and token sent by ANOTHER owner was taken for a replay of it and accepted; only
    the holder's own repeat is (tests/contract/test_lost_replies.py checks it through
    tether://)."""
    from tether.stores import Lease

    store = sqlite_store
    store.enqueue([NewJob("t")])
    (job,) = store.claim("w1", ["default"], 1, 30.0)
    assert store.finish([Outcome(job.lease, "done", result="1")]) == []
    other = Lease(job.id, job.attempt, "w2", job.lease.token)
    assert store.finish([Outcome(other, "done", result="1")]) == [other]
    assert store.finish([Outcome(job.lease, "done", result="1")]) == []  # the holder's replay
    after = store.get_job(job.id)
    assert after is not None and after.result == "1"


def test_a_plain_batch_returns_the_ids_of_its_own_rows(sqlite_store: SQLiteStore) -> None:
    """enqueue_insert_many reads no id per job: the ids are the consecutive run ending at the
    last inserted one (AUTOINCREMENT under the write lock), also after the newest job was
    deleted (its id is never handed out again)."""
    store = sqlite_store
    first = store.enqueue([NewJob(f"a{i}") for i in range(5)])
    store._db.get().execute("DELETE FROM jobs WHERE id = ?", (first[-1],))
    second = store.enqueue([NewJob(f"b{i}", queue="q", priority=i) for i in range(3)],
                           request_id="batch-1")
    assert second == list(range(first[-1] + 1, first[-1] + 4))
    assert store.enqueue([NewJob("x")], request_id="batch-1") == second  # the replay
    for prefix, ids in (("a", first[:-1]), ("b", second)):
        for i, job_id in enumerate(ids):
            job = store.get_job(job_id)
            assert job is not None and job.task == f"{prefix}{i}", (job_id, job)
    assert store.get_job(second[2]).priority == 2  # type: ignore[union-attr]


def test_multi_queue_claim_is_global_priority_order(sqlite_store: SQLiteStore) -> None:
    t0 = sqlite_store.now()
    sqlite_store.enqueue([NewJob("t", queue="a", priority=5) for _ in range(50)], now=t0)
    sqlite_store.enqueue([NewJob("t", queue="b", priority=1) for _ in range(3)], now=t0)
    sqlite_store.enqueue([NewJob("t", queue="c", priority=0) for _ in range(3)], now=t0)
    jobs = sqlite_store.claim("w", ["a", "b", "b", "c"], 8, 30.0, now=t0)
    assert [j.queue for j in jobs] == ["c"] * 3 + ["b"] * 3 + ["a"] * 2
    assert len({j.id for j in jobs}) == 8


def _plan(store: SQLiteStore, name: str) -> str:
    conn = store._db.get()
    params = {
        key: None
        for key in (
            "owner",
            "queues",
            "limit",
            "lease_ttl",
            "now",
            "leases",
            "outcomes",
            "cutoff",
            "ids",
            "error",
            "status",
            "id",
            "after_id",
            "queue",
            "nonce",
        )
    }
    # finish binds positional parameters (?1 .. ?10: executemany of tuples)
    bound = (None,) * 10 if "?1" in Q[name] else params
    rows = conn.execute("EXPLAIN QUERY PLAN " + Q[name], bound).fetchall()
    return "\n".join(str(row[3]) for row in rows)


@pytest.mark.parametrize(
    ("name", "must_use"),
    [
        ("claim", "jobs_claim"),
        ("heartbeat", "INTEGER PRIMARY KEY"),
        ("finish", "INTEGER PRIMARY KEY"),
        ("reap", "jobs_lease"),  # the expired leases, oldest first
        ("reap", "INTEGER PRIMARY KEY"),  # ... written back by primary key
        ("next_lease_expiry", "jobs_lease"),
        ("prune", "jobs_prune"),
    ],
)
def test_hot_paths_use_their_indexes(sqlite_store: SQLiteStore, name: str, must_use: str) -> None:
    plan = _plan(sqlite_store, name)
    assert must_use in plan, plan
    assert "SCAN jobs" not in plan and "SCAN j\n" not in plan + "\n", plan


def test_batched_drain_completes(sqlite_store: SQLiteStore) -> None:
    """Batched claim + finish drains everything with no rejected outcome. (Speed is the
    benchmark's business, bench/, never a timed unit test.)"""
    n = 5000
    for _ in range(n // 1000):
        sqlite_store.enqueue([NewJob("t") for _ in range(1000)])
    done = 0
    while jobs := sqlite_store.claim("w", ["default"], 100, 30.0):
        assert sqlite_store.finish([Outcome(j.lease, "done", result="null") for j in jobs]) == []
        done += len(jobs)
    assert done == n
    assert [c.count for c in sqlite_store.counts() if c.status == "done"] == [n]


def test_connections_of_ended_threads_are_closed(sqlite_store: SQLiteStore) -> None:
    conns: list[sqlite3.Connection] = []

    def use() -> None:
        sqlite_store.get_job(1)
        conns.append(sqlite_store._db.get())

    for _ in range(5):
        thread = threading.Thread(target=use)
        thread.start()
        thread.join()
    sqlite_store.get_job(1)  # this thread opens (or reuses) a connection: the dead are closed
    assert len(sqlite_store._db._all) <= 2
    for conn in conns[:-1]:
        with pytest.raises(sqlite3.ProgrammingError):
            conn.execute("SELECT 1")


def test_a_constraint_naming_locked_by_is_not_a_busy_database(
    sqlite_store: SQLiteStore, tmp_path: Path
) -> None:
    """Only SQLITE_BUSY / SQLITE_LOCKED are transient; a permanent error whose text happens to
    contain "locked" (the running-row CHECK names locked_by) must not be retried forever."""
    sqlite_store.enqueue([NewJob("t")])
    raw = sqlite3.connect(tmp_path / "tether.db")
    try:
        with pytest.raises(sqlite3.IntegrityError) as info:
            raw.execute("UPDATE jobs SET status = 'running'")
    finally:
        raw.close()
    assert "locked_by" in str(info.value)
    mapped = map_error(info.value)
    assert type(mapped) is StoreError, mapped
