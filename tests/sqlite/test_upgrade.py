"""Schema version 2 (issue #8) on a file made by tether's version-1 schema: ``migrate``
upgrades it in place and every job in it keeps working; without the upgrade, check_schema says
what to do."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tether._errors import SchemaError
from tether.stores import FlowLimit, NewJob, Outcome
from tether.stores._sqlite.rows import SCHEMA_STEPS
from tether.stores._sqlite.store import SCHEMA_VERSION, SQLiteStore


def _make_file(path: Path, version: int) -> None:
    """A database as the release of schema ``version`` left it: a pending and a running
    job."""
    raw = sqlite3.connect(path, isolation_level=None)
    try:
        raw.execute("BEGIN IMMEDIATE")
        for v in range(1, version + 1):
            for statement in SCHEMA_STEPS[v].values():
                raw.execute(statement)
            raw.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, 0)", (v,))
        raw.execute(
            "INSERT INTO jobs (task, queue, payload, status, run_at, max_attempts, max_stalls,"
            " created_at) VALUES ('t', 'default', '[[1], {}]', 'pending', 0, 5, 3, 0)"
        )
        raw.execute(
            "INSERT INTO jobs (task, queue, payload, status, run_at, max_attempts, max_stalls,"
            " created_at, attempt, locked_by, lease_until)"
            " VALUES ('t', 'old', '[[2], {}]', 'running', 0, 5, 3, 0, 1, 'old-worker', 1)"
        )
        raw.execute("COMMIT")
    finally:
        raw.close()


def test_version_5_file_gets_flow_limits(
    make_store: Callable[..., SQLiteStore], tmp_path: Path
) -> None:
    """Version 6 (issue #19): the old jobs have no limit_key and no snoozes, the claim with
    flow limits counts the job running at upgrade time, and snoozes and rate starts work."""
    _make_file(tmp_path / "tether.db", 5)
    store = make_store()
    with pytest.raises(SchemaError, match="run `tether migrate`"):
        store.check_schema()
    assert store.migrate() == SCHEMA_VERSION >= 6
    store.check_schema()
    old = [store.get_job(i) for i in (1, 2)]
    assert [(j.limit_key, j.snoozes) for j in old if j] == [(None, 0), (None, 0)]
    now = store.now()
    flow = [FlowLimit("task", "t", concurrency=2, rate=5, per=60.0)]
    (job,) = store.claim("w", ["default", "old"], 5, 30.0, now=now, flow=flow)
    assert job.id == 1, "the running job of the old file holds a slot"
    assert store.claim("w", ["default"], 5, 30.0, now=now, flow=flow) == []
    assert store.finish([Outcome(job.lease, "snoozed", retry_delay=0.0)], now=now) == []
    assert store.get_job(1).snoozes == 1  # type: ignore[union-attr]
    (key,) = store.enqueue([NewJob("t", limit_key="k")], now=now)
    assert store.get_job(key).limit_key == "k"  # type: ignore[union-attr]


def _make_v1_file(path: Path) -> None:
    """A version-1 database as the previous release left it: a pending and a running job."""
    _make_file(path, 1)


def test_version_1_file_is_upgraded_in_place(
    make_store: Callable[..., SQLiteStore], tmp_path: Path
) -> None:
    _make_v1_file(tmp_path / "tether.db")
    store = make_store()
    with pytest.raises(SchemaError, match="run `tether migrate`"):
        store.check_schema()
    assert SCHEMA_VERSION == 8
    assert store.migrate() == SCHEMA_VERSION
    store.check_schema()
    assert store.info().schema_version == SCHEMA_VERSION
    assert make_store().migrate() == SCHEMA_VERSION  # idempotent
    # Version 4: every job of the old file got a uid of its own (issue 18, B).
    uids = [store.get_job(i).uid for i in (1, 2)]  # type: ignore[union-attr]
    assert all(len(u) == 32 and int(u, 16) >= 0 for u in uids) and uids[0] != uids[1], uids

    (job,) = store.claim("w", ["default"], 5, 30.0)
    assert job.payload == "[[1], {}]" and job.lease_token
    assert store.finish([Outcome(job.lease, "done", result="1")]) == []
    # The job running at upgrade time has no token: the reaper still takes it back.
    reaped = store.reap_expired(now=store.now())
    assert [(r.job_id, r.owner, r.status) for r in reaped] == [(2, "old-worker", "pending")]
    ids = store.enqueue([NewJob("t")], request_id="r1")
    assert store.enqueue([NewJob("t")], request_id="r1") == ids
    # Version 8: jobs without a unique_key are no longer in jobs_unique (issue #23).
    (sql,) = store._db.get().execute(
        "SELECT sql FROM sqlite_master WHERE name = 'jobs_unique'").fetchone()
    assert "unique_key IS NOT NULL" in sql, sql


def test_housekeeping_deletes_request_records_older_than_a_day(
    sqlite_store: SQLiteStore,
) -> None:
    now = sqlite_store.now()
    old = sqlite_store.enqueue([NewJob("t")], now=now - 90_000, request_id="old")
    fresh = sqlite_store.enqueue([NewJob("t")], now=now, request_id="fresh")
    assert sqlite_store.housekeeping() == "deleted 1 request records older than 24 h"
    assert sqlite_store.housekeeping() is None
    assert sqlite_store.enqueue([NewJob("t")], now=now, request_id="fresh") == fresh
    assert sqlite_store.enqueue([NewJob("t")], now=now, request_id="old") != old
