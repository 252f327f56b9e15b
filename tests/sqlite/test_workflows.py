"""Job dependencies on SQLite (issue #20), what the contract suite cannot see: the upgrade of a
version-6 file with jobs in it (schema version 7 rebuilds the jobs table), a fan-out and a
fan-in at the limits, a long chain, and what a job without links costs (the statements its
writes run, compared with the ones they ran before workflows)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.sqlite._migrate import migrate_at_once
from tether._limits import MAX_AFTER
from tether.stores import JobStatus, NewJob, Outcome
from tether.stores._sqlite.links import L
from tether.stores._sqlite.rows import OPS, SCHEMA_STEPS, Q
from tether.stores._sqlite.store import SCHEMA_VERSION, SQLiteStore

#: The columns of version 6's jobs table, in its order.
V6_COLUMNS = (
    "id, task, queue, payload, status, priority, run_at, attempt, max_attempts, failures, "
    "stall_count, max_stalls, interruptions, locked_by, lease_until, created_at, started_at, "
    "finished_at, last_error, failure_reason, result, checkpoint, progress, unique_key, "
    "cancel_requested, errors, lease_token, uid, limit_key, snoozes"
)
INDEXES = {"jobs_claim", "jobs_lease", "jobs_unique", "jobs_prune", "jobs_flow"}


def _make_v6_file(path: Path) -> None:
    """A database as version 6 left it: jobs 1-5 (pending with a unique key, running, done,
    failed with an error record, pending with a limit key) and job 6 made then purged, so
    the AUTOINCREMENT counter is above the largest id."""
    raw = sqlite3.connect(path, isolation_level=None)
    try:
        raw.execute("BEGIN IMMEDIATE")
        for v in range(1, 7):
            for statement in SCHEMA_STEPS[v].values():
                raw.execute(statement)
            raw.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, 0)", (v,))
        insert = ("INSERT INTO jobs (task, queue, payload, status, run_at, max_attempts, "
                  "max_stalls, created_at, unique_key, attempt, locked_by, lease_until, "
                  "finished_at, result, failure_reason, errors, uid, limit_key, snoozes) "
                  "VALUES ('t', :queue, '[[], {}]', :status, 0, 1, 1, 0, :key, :attempt, "
                  ":owner, :lease, :finished, :result, :reason, :errors, :uid, :limit, :snoozes)")
        base = {"queue": "default", "key": None, "attempt": 0, "owner": None, "lease": None,
                "finished": None, "result": None, "reason": None, "errors": "[]",
                "uid": None, "limit": None, "snoozes": 0}
        for row in (
            {"status": "pending", "key": "k", "uid": "a" * 32},
            {"status": "running", "queue": "old", "attempt": 1, "owner": "old-worker",
             "lease": 1.0},
            {"status": "done", "attempt": 1, "finished": 5.0, "result": '"r"'},
            {"status": "failed", "attempt": 1, "finished": 6.0, "reason": "error",
             "errors": '[{"attempt":1,"error":"boom","reason":"error","at":6,"owner":"w"}]'},
            {"status": "pending", "queue": "keyed", "limit": "L", "snoozes": 2},
            {"status": "pending"},
        ):
            raw.execute(insert, {**base, **row})
        raw.execute("DELETE FROM jobs WHERE id = 6")
        raw.execute("COMMIT")
    finally:
        raw.close()


def _rows(path: Path) -> list[tuple[Any, ...]]:
    raw = sqlite3.connect(path)
    try:
        return raw.execute(f"SELECT {V6_COLUMNS} FROM jobs ORDER BY id").fetchall()
    finally:
        raw.close()


def test_version_6_file_with_jobs_is_upgraded_in_place(
    make_store: Callable[..., SQLiteStore], tmp_path: Path
) -> None:
    path = tmp_path / "tether.db"
    _make_v6_file(path)
    before = _rows(path)
    store = make_store()
    assert SCHEMA_VERSION == 8
    assert store.migrate() == 8
    store.check_schema()
    assert make_store().migrate() == 8  # idempotent
    assert _rows(path) == before, "every job keeps every field"
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        indexes = {r[0]: r[1] for r in raw.execute(
            "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")}
        assert indexes.items() >= {name: "jobs" for name in INDEXES}.items()
        assert indexes["job_links_parent"] == "job_links"
        assert raw.execute("SELECT name FROM sqlite_master WHERE name = 'jobs_v7'").fetchall() \
            == []
        assert raw.execute("SELECT seq FROM sqlite_sequence WHERE name = 'jobs'").fetchall() \
            == [(6,)]
    finally:
        raw.close()
    now = store.now()
    # The counter carried over: the purged id 6 is never handed out again.
    assert store.enqueue([NewJob("t", unique_key="k")], now=now) == [1], "key still held"
    (tail,) = store.enqueue([NewJob("t", after=(1, 3))], now=now)
    assert tail == 7
    links = store.job_links(tail)
    assert (links.parents, links.waiting_on, store.get_job(tail).status) == (  # type: ignore[union-attr]
        (1, 3), 1, "waiting")
    (doomed,) = store.enqueue([NewJob("t", after=(4,))], now=now)
    assert store.get_job(doomed).failure_reason == "dependency_failed"  # type: ignore[union-attr]
    assert store.job_links(3).children == (tail,)
    # The old jobs work as before: claimed, finished, reaped; the waiting child is released.
    (job,) = store.claim("w", ["default"], 5, 30.0, now=now)
    assert job.id == 1
    assert store.finish([Outcome(job.lease, "done", result="1")], now=now) == []
    assert store.get_job(tail).status == "pending"  # type: ignore[union-attr]
    reaped = store.reap_expired(now=now)
    assert [(r.job_id, r.owner, r.status) for r in reaped] == [(2, "old-worker", "failed")]
    assert [j.id for j in store.get_jobs([5, 4, 3])] == [5, 4, 3]
    assert store.get_job(5).snoozes == 2  # type: ignore[union-attr]


def test_a_store_opened_before_the_upgrade_keeps_working(
    make_store: Callable[..., SQLiteStore], tmp_path: Path
) -> None:
    """The rebuild drops the table every prepared statement of other connections was
    compiled against: SQLite re-prepares them, no caller sees an error."""
    _make_v6_file(tmp_path / "tether.db")
    old = make_store()
    now = old.now()
    assert old.get_job(1).status == "pending"  # type: ignore[union-attr]
    assert old.claim("w", ["keyed"], 1, 30.0, now=now)[0].id == 5
    assert make_store().migrate() == 8
    assert old.get_job(1).status == "pending"  # type: ignore[union-attr]
    (job,) = old.claim("w", ["default"], 1, 30.0, now=now)
    assert old.finish([Outcome(job.lease, "done", result="1")], now=now) == []
    old.check_schema()


def test_concurrent_upgrades_of_a_version_6_file(
    make_store: Callable[..., SQLiteStore], tmp_path: Path
) -> None:
    path = tmp_path / "tether.db"
    _make_v6_file(path)
    before = _rows(path)
    stores = [make_store() for _ in range(4)]
    versions = migrate_at_once(stores)
    assert versions == [8] * len(stores)
    assert _rows(path) == before


def test_a_fan_out_and_a_fan_in_at_the_limits(sqlite_store: SQLiteStore) -> None:
    """One parent of 10,000 children, released by one finish; one child of MAX_AFTER
    parents, released by the finish of the last one, not before."""
    store = sqlite_store
    now = store.now()
    (root,) = store.enqueue([NewJob("t", queue="root")], now=now)
    kids = store.enqueue([NewJob("t", queue="kids", after=(root,)) for _ in range(10_000)],
                         now=now)
    (job,) = store.claim("w", ["root"], 1, 30.0, now=now)
    assert store.finish([Outcome(job.lease, "done", result="1")], now=now + 1) == []
    counts = {c.status: c.count for c in store.counts() if c.queue == "kids"}
    assert counts == {"pending": 10_000}
    assert store.job_links(root).children == tuple(kids)

    parents = store.enqueue([NewJob("t", queue="parents") for _ in range(MAX_AFTER)], now=now)
    (callback,) = store.enqueue([NewJob("t", queue="cb", after=tuple(parents))], now=now)
    assert store.job_links(callback).waiting_on == MAX_AFTER
    for n in range(MAX_AFTER // 1000):
        jobs = store.claim("w", ["parents"], 1000, 30.0, now=now)
        jobs.sort(key=lambda j: j.id)
        if n == MAX_AFTER // 1000 - 1:  # the last parent ends alone
            last = jobs.pop()
        assert store.finish([Outcome(j.lease, "done", result="1") for j in jobs],
                            now=now + 2) == []
    assert store.job_links(callback).waiting_on == 1
    assert store.get_job(callback).status == "waiting"  # type: ignore[union-attr]
    assert store.finish([Outcome(last.lease, "done", result="1")], now=now + 3) == []
    assert store.get_job(callback).status == "pending"  # type: ignore[union-attr]
    assert store.job_links(callback).parents == tuple(parents)


def test_a_chain_of_a_thousand_is_cancelled_in_one_write(sqlite_store: SQLiteStore) -> None:
    store = sqlite_store
    now = store.now()
    (root,) = store.enqueue([NewJob("t", queue="root")], now=now)
    chain = [root]
    for _ in range(1000):
        chain.extend(store.enqueue([NewJob("t", after=(chain[-1],))], now=now))
    (job,) = store.claim("w", ["root"], 1, 30.0, now=now)
    assert store.finish([Outcome(job.lease, "dead", error="boom")], now=now + 1) == []
    jobs = store.get_jobs(chain[1:])
    assert {(j.status, j.failure_reason, j.finished_at) for j in jobs} == {
        ("cancelled", "dependency_failed", now + 1)}
    assert jobs[-1].last_error == f"dependency_failed: job {chain[-2]} ended cancelled"


# -- cost: a job without links runs the statements it ran before workflows -------------------
def _names() -> dict[str, str]:
    """Statement name by its first line (every named statement starts with its comment)."""
    named = {**Q, **OPS, **{f"links:{k}": v for k, v in L.items()}}
    firsts: dict[str, str] = {}
    for name, text in named.items():
        firsts.setdefault(text.splitlines()[0], name)
    return firsts


@contextmanager
def _traced(store: SQLiteStore) -> Iterator[list[str]]:
    """The names of the statements this thread's connection runs meanwhile."""
    firsts = _names()
    seen: list[str] = []

    def trace(sql: str) -> None:
        first = sql.splitlines()[0]
        seen.append(firsts.get(first, first.split(maxsplit=1)[0] if first.strip() else sql))

    conn = store._db.get()
    conn.set_trace_callback(trace)
    try:
        yield seen
    finally:
        conn.set_trace_callback(None)


def test_a_job_without_links_runs_no_link_statement(sqlite_store: SQLiteStore) -> None:
    """The lease path of jobs without parents or children: the same statements as before
    workflows, and of links.sql only the finish's one probe of whether the file has any link
    (issue #23: the finish runs once per outcome through executemany, which returns no rows,
    so it can no longer hand back has_children; one probe per batch instead)."""
    store = sqlite_store
    now = store.now()
    with _traced(store) as seen:
        ids = store.enqueue([NewJob("t", max_attempts=1, max_stalls=1) for _ in range(4)],
                            now=now)
    # jobs that differ only in payload: one statement for the batch (enqueue_insert_shared)
    assert seen == ["BEGIN", "enqueue_insert_shared", "last_insert_id", "COMMIT"]
    jobs = store.claim("w", ["default"], 4, 5.0, now=now)
    with _traced(store) as seen:
        assert store.finish([Outcome(jobs[0].lease, "done", result="1"),
                             Outcome(jobs[1].lease, "dead", error="x")], now=now) == []
    assert seen == ["BEGIN", "finish_done", "finish", "links:any_link", "COMMIT"]
    with _traced(store) as seen:
        assert len(store.reap_expired(now=now + 10)) == 2
        assert store.cancel(store.enqueue([NewJob("t")], now=now)[0], now=now) == "cancelled"
    assert not [name for name in seen if name.startswith("links:")], seen
    assert seen.count("reap") == seen.count("cancel") == 1
    assert sorted(ids) == [j.id for j in sorted(jobs, key=lambda j: j.id)]
    with _traced(store) as seen:
        assert store.prune("done", 0, now=now + 10) == 1
    assert seen == ["BEGIN", "links:any_link", "prune", "COMMIT"], "no RETURNING, no unlink"


@pytest.mark.parametrize(
    ("name", "must_use"),
    [
        ("enqueue_find_unique", ["jobs_unique"]),
        ("retry_failed", ["jobs_prune", "jobs_unique"]),
        ("retry_conflicts", ["jobs_prune", "jobs_unique"]),
        ("prune", ["jobs_prune", "job_links_parent"]),
        ("prune_linked", ["jobs_prune", "job_links_parent"]),
        ("links:cancel_descendants", ["job_links_parent"]),
        ("links:release_children", ["job_links_parent"]),
        ("links:resolve_links", ["job_links_parent"]),
        ("links:unlink_children", ["PRIMARY KEY"]),
        ("links:job_links", ["PRIMARY KEY (child=?)", "job_links_parent"]),
    ],
)
def test_link_statements_use_their_indexes(
    sqlite_store: SQLiteStore, name: str, must_use: list[str]
) -> None:
    """The partial indexes of version 7 are written as OR chains: a statement uses one only
    when its WHERE implies the index's, so every statement that must use one is checked."""
    sql = L[name.removeprefix("links:")] if name.startswith("links:") else Q[name]
    params = {"unique_key": "k", "ids": "[1]", "now": 0.0, "status": "done", "cutoff": 0.0,
              "limit": 10, "ended": '[[1, "failed"]]', "id": 1}
    conn = sqlite_store._db.get()
    plan = "\n".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
    for index in must_use:
        assert index in plan, plan
    assert "SCAN jobs" not in plan and "SCAN job_links" not in plan, plan


def test_prune_drops_the_links_of_pruned_children(sqlite_store: SQLiteStore) -> None:
    store = sqlite_store
    now = store.now()
    (parent,) = store.enqueue([NewJob("t", queue="p")], now=now)
    (kid,) = store.enqueue([NewJob("t", queue="k", after=(parent,))], now=now)
    (job,) = store.claim("w", ["p"], 1, 30.0, now=now)
    assert store.finish([Outcome(job.lease, "done", result="1")], now=now) == []
    (running,) = store.claim("w", ["k"], 1, 30.0, now=now)
    assert store.finish([Outcome(running.lease, "done", result="2")], now=now) == []
    assert store.prune("done", 10, now=now + 100) == 2
    raw = store._db.get()
    assert raw.execute("SELECT count(*) FROM job_links").fetchone() == (0,)
    assert store.get_job(kid) is None


@pytest.mark.parametrize("statuses", [["waiting"], ["pending"], ["waiting", "pending"]])
def test_purge_of_a_parent_that_had_not_ended(
    sqlite_store: SQLiteStore, statuses: list[JobStatus]
) -> None:
    """A purged parent that was not done can never be: its waiting children are cancelled,
    their error saying it was purged; its own links as a child go with it."""
    store = sqlite_store
    now = store.now()
    (root,) = store.enqueue([NewJob("t", queue="root")], now=now)
    (pending,) = store.enqueue([NewJob("t", queue="q")], now=now)
    (waiting,) = store.enqueue([NewJob("t", queue="q", after=(root,))], now=now)
    parent = waiting if statuses == ["waiting"] else pending
    (kid,) = store.enqueue([NewJob("t", queue="kids", after=(parent,))], now=now)
    assert store.purge("q", statuses) == (2 if len(statuses) == 2 else 1)
    job = store.get_job(kid)
    assert job is not None and job.status == "cancelled"
    assert job.last_error == f"dependency_failed: job {parent} was purged"
    assert store.job_links(root).children == (() if "waiting" in statuses else (waiting,))
