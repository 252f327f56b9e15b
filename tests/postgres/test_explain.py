"""The hot statements stay index scans when the table holds a million finished jobs.

One module-scoped schema: 1,000,000 ``done`` rows inserted with ``generate_series`` (fast),
plus a few pending and running jobs, then ANALYZE. Each named query from ``queries.sql`` is
EXPLAINed twice: with its parameter values (the custom plan of the first executions) and as a
server-side prepared statement under ``plan_cache_mode = force_generic_plan`` (the plan
psycopg's automatic prepared statements may settle on).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.servers import isolated_url
from tether.stores import Lease, NewJob
from tether.stores._postgres.store import PostgresStore

BULK = 1_000_000
_PARAM = re.compile(r"%\((\w+)\)s")

# One test process for the module: its million-row fixture is built once, not once per process.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("postgres-explain")]


class Bulk:
    def __init__(self, store: PostgresStore, conn: psycopg.Connection[Any]) -> None:
        self.store = store
        self.conn = conn
        self.leases: list[Lease] = []


@pytest.fixture(scope="module")
def bulk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bulk]:
    with isolated_url("postgres", tmp_path_factory.mktemp("pg")) as url:
        store = PostgresStore(url)
        try:
            store.migrate()
            conn = psycopg.connect(store._connector.dsn, autocommit=True)
            conn.execute(f'SET search_path TO "{store.schema}"')
            conn.execute(
                """
                INSERT INTO jobs (task, queue, payload, status, priority, run_at, attempt,
                                  max_attempts, max_stalls, created_at, started_at,
                                  finished_at, result)
                SELECT 'bulk.task', 'default', '[[], {}]', 'done', 0,
                       now() - interval '2 days', 1, 5, 3, now() - interval '2 days',
                       now() - interval '2 days', now() - g * interval '1 millisecond', 'null'
                FROM generate_series(1, %s) AS g
                """,
                (BULK,),
            )
            store.enqueue([NewJob("t", queue=q) for q in ("default", "other") for _ in range(5)])
            held = store.claim("w1", ["default"], 3, 30)
            fixture = Bulk(store, conn)
            fixture.leases = [job.lease for job in held]
            conn.execute("ANALYZE jobs")
            yield fixture
            conn.close()
        finally:
            store.close()


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _explain_custom(bulk: Bulk, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    with bulk.conn.transaction(force_rollback=True):
        row = bulk.conn.execute(
            b"EXPLAIN (FORMAT JSON) " + bulk.store.queries[name].encode(), params
        ).fetchone()
    assert row is not None
    return list(_nodes(row[0][0]["Plan"]))


def _explain_generic(bulk: Bulk, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    order: list[str] = []
    for key in _PARAM.findall(bulk.store.queries[name]):
        if key not in order:
            order.append(key)
    text = _PARAM.sub(lambda m: f"${order.index(m.group(1)) + 1}",
                      bulk.store.queries[name])
    conn = bulk.conn
    # A client-side cursor inlines the values as literals, which EXECUTE coerces to the
    # parameter types PREPARE inferred (server-side parameters of EXPLAIN stay untyped).
    cursor = psycopg.ClientCursor(conn)
    conn.execute(b"PREPARE tether_explain AS " + text.encode())
    try:
        with conn.transaction(force_rollback=True):
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            args = f"({', '.join(['%s'] * len(order))})" if order else ""
            row = cursor.execute(
                f"EXPLAIN (FORMAT JSON) EXECUTE tether_explain{args}".encode(),
                [params[key] for key in order],
            ).fetchone()
    finally:
        conn.execute("DEALLOCATE tether_explain")
    assert row is not None
    return list(_nodes(row[0][0]["Plan"]))


def _assert_index_only(nodes: list[dict[str, Any]], indexes: set[str]) -> None:
    """No Seq Scan on jobs, and at least one scan through one of the expected indexes.

    Bitmap Index Scan nodes name their index but no relation; every index of ours is on
    ``jobs`` and named ``jobs_*``, so they count by their index name.
    """
    on_jobs = [node for node in nodes if node.get("Relation Name") == "jobs"
               or str(node.get("Index Name", "")).startswith("jobs_")]
    kinds = [(node["Node Type"], node.get("Index Name")) for node in on_jobs]
    assert not any(kind == "Seq Scan" for kind, _ in kinds), kinds
    assert any(name in indexes for _, name in kinds), kinds


def _params(bulk: Bulk, name: str) -> dict[str, Any]:
    leases = bulk.leases
    base: dict[str, Any] = {"now": None}
    return (
        base
        | {
            "claim": {"queue": "default", "limit": 100, "owner": "w2", "ttl": 30.0,
                      "nonce": "n" * 32, "request": "claim:" + "n" * 32},
            "claim_queues": {
                "queues": ["default", "other"],
                "limit": 100,
                "owner": "w2",
                "ttl": 30.0,
                "nonce": "n" * 32,
                "request": "claim:" + "n" * 32,
            },
            "heartbeat": {
                "worker": "w1",
                "ids": [lease.job_id for lease in leases],
                "attempts": [lease.attempt for lease in leases],
                "owners": [lease.owner for lease in leases],
                "tokens": [lease.token for lease in leases],
                "ttl": 30.0,
            },
            "finish": {
                "batch": json.dumps([
                    {"id": lease.job_id, "attempt": lease.attempt, "owner": lease.owner,
                     "token": lease.token, "kind": "done", "result": "1", "error": None,
                     "reason": "done", "retry_delay": 0.0, "digest": "d"}
                    for lease in leases
                ]),
                "ids": "{" + ",".join(str(lease.job_id) for lease in leases) + "}",
                "done": "t_explain_done", "done_key": 1, "gate": True,
                "channel": "t_explain_jobs",
            },
            "finish_replays": {
                "batch": json.dumps([
                    {"id": lease.job_id, "attempt": lease.attempt, "owner": lease.owner,
                     "token": lease.token, "digest": "d"}
                    for lease in leases
                ]),
                "ids": "{" + ",".join(str(lease.job_id) for lease in leases) + "}",
            },
            "reap_expired": {"grace": 0.0, "limit": 1000, "error": "worker lease expired",
                             "channel": "t_explain_jobs", "done": "t_explain_done"},
            "next_lease_expiry": {},
            "prune": {"status": "done", "older_than": 3600.0, "limit": 1000},
        }[name]
    )


# Fenced batch writes probe the batch's rows by primary key (never the fleet's running set).
FENCED = {"jobs_pkey"}
CASES = [
    ("claim", {"jobs_claim_idx"}),
    ("claim_queues", {"jobs_claim_idx"}),
    ("heartbeat", FENCED),
    ("finish", FENCED),
    ("finish_replays", FENCED),
    ("reap_expired", {"jobs_reap_idx"}),
    ("next_lease_expiry", {"jobs_reap_idx"}),
    ("prune", {"jobs_prune_idx"}),
]


@pytest.mark.parametrize(("name", "index"), CASES)
def test_custom_plan_uses_index(bulk: Bulk, name: str, index: set[str]) -> None:
    _assert_index_only(_explain_custom(bulk, name, _params(bulk, name)), index)


@pytest.mark.parametrize(("name", "index"), CASES)
def test_generic_plan_uses_index(bulk: Bulk, name: str, index: set[str]) -> None:
    _assert_index_only(_explain_generic(bulk, name, _params(bulk, name)), index)


def test_claim_and_reap_really_work_on_the_big_table(bulk: Bulk) -> None:
    store = bulk.store
    claimed = store.claim("w3", ["other"], 10, 30)
    assert len(claimed) == 5
    t = store.now()
    reaped = store.reap_expired(now=t + 60, limit=1000)
    assert {r.job_id for r in reaped} >= {job.id for job in claimed}


@pytest.mark.parametrize("explain", [_explain_custom, _explain_generic])
def test_reap_writes_by_primary_key(bulk: Bulk, explain: Any) -> None:
    """The reap CTE walks the partial reap index; the UPDATE must then join back by primary
    key. Joining through the reap index again (as a repeated ``status = 'running'`` invited)
    probes the whole running set per expired row: quadratic in a mass expiry."""
    nodes = explain(bulk, "reap_expired", _params(bulk, "reap_expired"))
    on_jobs = [(n["Node Type"], n.get("Index Name")) for n in nodes
               if n.get("Relation Name") == "jobs"]
    assert any(name == "jobs_reap_idx" for _, name in on_jobs), on_jobs
    assert any(name == "jobs_pkey" for _, name in on_jobs), on_jobs


@pytest.mark.parametrize("explain", [_explain_custom, _explain_generic])
@pytest.mark.parametrize("name", ["heartbeat", "finish"])
def test_fenced_writes_never_walk_the_running_set(bulk: Bulk, name: str, explain: Any) -> None:
    """A fenced batch write costs O(batch), not O(jobs running in the whole fleet)."""
    nodes = explain(bulk, name, _params(bulk, name))
    used = {n.get("Index Name") for n in nodes} - {None}
    assert "jobs_reap_idx" not in used, used
    assert "jobs_pkey" in used, used


@pytest.mark.parametrize("explain", [_explain_custom, _explain_generic])
@pytest.mark.parametrize("name", ["claim", "claim_queues"])
def test_the_claim_replay_probe_is_one_index_probe(bulk: Bulk, name: str, explain: Any) -> None:
    """Looking for the jobs a replayed claim already took (request id = token nonce) walks the
    small partial nonce index, not the running set and never the table."""
    nodes = explain(bulk, name, _params(bulk, name))
    used = {n.get("Index Name") for n in nodes} - {None}
    assert "jobs_nonce_idx" in used, used
    assert "requests_pkey" in used, "the claim's request record: one primary-key probe"
    assert not any(n["Node Type"] == "Seq Scan" and n.get("Relation Name") in ("jobs", "requests")
                   for n in nodes)


@pytest.mark.parametrize("explain", [_explain_custom, _explain_generic])
def test_enqueue_finds_key_holders_through_the_unique_index(bulk: Bulk, explain: Any) -> None:
    params = {
        "now": None, "channel": "t_explain_jobs", "request_id": "r-1",
        "tasks": ["t", "t"], "payloads": ["[[], {}]"] * 2, "queues": ["default"] * 2,
        "priorities": [0, 0], "run_ats": [None, None], "delays": [0.0, 0.0],
        "max_attempts": [5, 5], "max_stalls": [3, 3], "unique_keys": ["k1", None],
        "limit_keys": [None, None],
        "jobs_key": 1, "gate": True,
    }
    nodes = explain(bulk, "enqueue", params)
    used = {n.get("Index Name") for n in nodes} - {None}
    assert "jobs_unique_key_idx" in used, used
    assert not any(n["Node Type"] == "Seq Scan" and n.get("Relation Name") in ("jobs", "requests")
                   for n in nodes)


EXPIRED = 2_000


def test_reap_analyze_walks_only_the_expired_leases(bulk: Bulk) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of a real mass reap next to the million finished rows: one
    Index Scan of the partial reap index that returns exactly the expired rows (no Seq Scan,
    no bitmap over the table, never a per-row re-probe of the reap index: loops = 1), one
    primary-key probe per reaped row, and buffer touches bounded by the expired rows, not by
    the history. Run inside a transaction that is rolled back."""
    conn = bulk.conn
    with conn.transaction(force_rollback=True):
        conn.execute(
            """
            INSERT INTO jobs (task, queue, payload, status, priority, run_at, attempt,
                              max_attempts, max_stalls, locked_by, lease_until, created_at,
                              started_at, lease_token)
            SELECT 'bulk.task', 'default', '[[], {}]', 'running', 0, now() - interval '1 day',
                   1, 5, 3, 'ghost-' || (g %% 3), now() - interval '1 hour' + g * interval '1 ms',
                   now() - interval '1 day', now() - interval '1 hour', 'n:' || g
            FROM generate_series(1, %s) AS g
            """,
            (EXPIRED,),
        )
        params = _params(bulk, "reap_expired") | {"limit": 10_000}
        row = conn.execute(
            b"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
            + bulk.store.queries["reap_expired"].encode(), params).fetchone()
    assert row is not None
    top = row[0][0]["Plan"]
    nodes = list(_nodes(top))
    assert not any(n["Node Type"].startswith(("Seq Scan", "Bitmap"))
                   and (n.get("Relation Name") == "jobs"
                        or str(n.get("Index Name", "")).startswith("jobs_")) for n in nodes)
    reap = [n for n in nodes if n.get("Index Name") == "jobs_reap_idx"]
    assert [(n["Node Type"], n["Actual Loops"]) for n in reap] == [("Index Scan", 1)]
    assert reap[0]["Actual Rows"] >= EXPIRED
    assert reap[0]["Shared Hit Blocks"] + reap[0]["Shared Read Blocks"] < 3 * EXPIRED
    pkey = [n for n in nodes if n.get("Index Name") == "jobs_pkey"]
    assert [n["Actual Rows"] * n["Actual Loops"] for n in pkey] == [reap[0]["Actual Rows"]]
    touched = top["Shared Hit Blocks"] + top["Shared Read Blocks"]
    assert touched < 25 * EXPIRED, touched
