"""The SQLite side of flow limits (issue #19): what the contract suite cannot see. The statements
of a limited claim seek their indexes, a key's backlog longer than any bound never hides the
keys behind it, the start log stays as small as the windows, and jobs without a key never
enter the flow index (so an application without keys pays nothing for it)."""

from __future__ import annotations

import re

import pytest

from tether.stores import FlowLimit, NewJob, Outcome
from tether.stores._sqlite.flow import HORIZON, F
from tether.stores._sqlite.store import SQLiteStore

T = "tests.flow"


def _plan(store: SQLiteStore, name: str) -> str:
    sql = F[name]
    params = {key: None for key in re.findall(r":(\w+)", sql)}
    rows = store._db.get().execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
    return "\n".join(str(row[3]) for row in rows)


@pytest.mark.parametrize(
    ("name", "must_use"),
    [
        ("flow_running", "jobs_lease"),
        ("flow_started", "flow_starts_group (grp>? AND grp<?)"),
        ("flow_first_group", "jobs_flow (queue=? AND task>?)"),
        ("flow_next_task", "jobs_flow (queue=? AND task>?)"),
        ("flow_next_key", "jobs_flow (queue=? AND task=? AND limit_key>?)"),
        ("flow_heads", "jobs_flow (queue=? AND task=? AND limit_key=?)"),
        ("flow_group_heads", "jobs_flow (queue=? AND task=? AND limit_key>?)"),
        ("flow_unkeyed", "jobs_claim (queue=?)"),
        ("flow_walk", "jobs_claim (queue=?)"),
        ("flow_drop_starts", "flow_starts_group (grp=? AND at<?)"),
    ],
)
def test_flow_statements_seek_their_indexes(
    sqlite_store: SQLiteStore, name: str, must_use: str
) -> None:
    plan = _plan(sqlite_store, name)
    assert must_use in plan, plan
    # The running jobs are read whole, through the partial index that holds only them.
    assert "SCAN jobs" not in plan.replace("SCAN jobs USING INDEX jobs_lease", ""), plan
    assert "SCAN flow_starts" not in plan, plan


def test_a_backlog_longer_than_the_horizon_hides_no_key(sqlite_store: SQLiteStore) -> None:
    t0 = sqlite_store.now()
    for _ in range(HORIZON // 1000 + 1):
        sqlite_store.enqueue([NewJob(T, limit_key="big") for _ in range(1000)], now=t0)
    small = sqlite_store.enqueue([NewJob(T, limit_key="small") for _ in range(3)], now=t0 + 1)
    flow = [FlowLimit("task", T, concurrency=1, per_key=True)]
    (first,) = sqlite_store.claim("w", ["default"], 1, 60.0, now=t0 + 2, flow=flow)
    assert first.limit_key == "big"
    got = sqlite_store.claim("w", ["default"], 5, 60.0, now=t0 + 3, flow=flow)
    assert [j.id for j in got] == small[:1]


def test_the_start_log_keeps_only_the_window(sqlite_store: SQLiteStore) -> None:
    t0 = sqlite_store.now()
    sqlite_store.enqueue([NewJob(T) for _ in range(6)], now=t0)
    flow = [FlowLimit("task", T, rate=2, per=60.0)]
    conn = sqlite_store._db.get()
    for n in range(3):
        got = sqlite_store.claim("w", ["default"], 5, 60.0, now=t0 + n * 100, flow=flow)
        assert len(got) == 2
        sqlite_store.finish([Outcome(j.lease, "done", result="1") for j in got],
                            now=t0 + n * 100 + 1)
        assert conn.execute("SELECT count(*) FROM flow_starts").fetchone()[0] == 2


def test_jobs_without_a_key_stay_out_of_the_flow_index(sqlite_store: SQLiteStore) -> None:
    sqlite_store.enqueue([NewJob(T) for _ in range(3)] + [NewJob(T, limit_key="k")])
    conn = sqlite_store._db.get()
    count = "SELECT count(*) FROM jobs INDEXED BY jobs_flow WHERE status = 'pending' " \
            "AND limit_key IS NOT NULL AND queue = 'default' AND task >= ''"
    assert conn.execute(count).fetchone()[0] == 1
    assert sqlite_store.claim("w", ["default"], 10, 60.0, flow=[FlowLimit("task", T)])
    assert conn.execute(count).fetchone()[0] == 0


def _match_memory(sqlite_store: SQLiteStore, seed: int, jobs: int,
                  keys: list[str | None], steps: int) -> None:
    """Random jobs (keys drawn from ``keys``, repeats weigh), priorities and limits, the same
    claims on the SQLite and the memory store, finishing some jobs between claims: both must
    choose exactly the same jobs (memory follows the rules literally)."""
    import random

    from tether.stores import open_store

    rng = random.Random(seed)
    memory = open_store("memory://")
    memory.migrate()
    t0 = sqlite_store.now()
    tasks = ["a", "b", "c"]
    new = [NewJob(rng.choice(tasks), queue=rng.choice(["q1", "q2"]),
                  priority=rng.choice([0, 0, 0, 1, -1]), limit_key=rng.choice(keys),
                  run_at=t0 - rng.random() * 10)
           for _ in range(jobs)]
    assert sqlite_store.enqueue(new, now=t0) == memory.enqueue(new, now=t0)
    flows = [
        [FlowLimit("task", "a", concurrency=2, per_key=True)],
        [FlowLimit("task", "a", concurrency=3, per_key=True),
         FlowLimit("task", "b", concurrency=4), FlowLimit("queue", "q2", concurrency=9)],
        [FlowLimit("task", "c", rate=5, per=60.0, per_key=True),
         FlowLimit("task", "a", per_key=True)],
        [FlowLimit("task", t, concurrency=1, per_key=True) for t in tasks],
    ]
    held: list[int] = []
    for step in range(steps):
        flow = rng.choice(flows)
        limit = rng.choice([1, 2, 3, 5, 8, 20, 70])
        now = t0 + step
        queues = rng.choice([["q1"], ["q2"], ["q1", "q2"]])
        got = sqlite_store.claim("w", queues, limit, 3600.0, now=now, flow=flow)
        want = memory.claim("w", queues, limit, 3600.0, now=now, flow=flow)
        assert sorted(j.id for j in got) == sorted(j.id for j in want), (step, flow, limit)
        held += [j.id for j in want]
        rng.shuffle(held)
        for job_id in held[:rng.randint(0, len(held))]:
            for store in (sqlite_store, memory):
                job = store.get_job(job_id)
                assert job is not None
                assert store.finish([Outcome(job.lease, "done", result="1")], now=now) == []
            held.remove(job_id)
    memory.close()


def test_limited_claims_match_the_memory_store(sqlite_store: SQLiteStore) -> None:
    """The SQLite claim chooses three ways (the walk in claim order; every group's first job
    in one statement; the per-group walk); each must give exactly the memory store's choice.
    Few jobs per key: mostly the walk."""
    _match_memory(sqlite_store, 19, 400, [None, "k1", "k2", "k3", "k4", "", "k5"], 200)


def test_limited_claims_behind_a_hot_key_match_the_memory_store(
    sqlite_store: SQLiteStore,
) -> None:
    """As above with one key holding most of the jobs: at its limit, runs of it longer than the
    walk's bound stand in front of the others, so the claims that fall back are checked too."""
    keys: list[str | None] = ["hot"] * 12 + [None, "k1", "k2", "k3", ""]
    _match_memory(sqlite_store, 7, 1500, keys, 120)


def test_the_walk_gives_up_past_its_bound(sqlite_store: SQLiteStore) -> None:
    """A key at its limit with more jobs in front than the walk reads: the walk says so (None)
    instead of reading on, and the claim still finds the jobs behind them."""
    from tether.stores._flow import FlowBook
    from tether.stores._sqlite.flow_walk import bound, walk_claim

    t0 = sqlite_store.now()
    sqlite_store.enqueue([NewJob(T, limit_key="big") for _ in range(bound(5) + 10)], now=t0)
    small = sqlite_store.enqueue([NewJob(T, limit_key="small") for _ in range(3)], now=t0 + 1)
    plain = sqlite_store.enqueue([NewJob(T)], now=t0 + 2)
    flow = [FlowLimit("task", T, concurrency=1, per_key=True)]
    (first,) = sqlite_store.claim("w", ["default"], 1, 60.0, now=t0 + 3, flow=flow)
    assert first.limit_key == "big"
    book = FlowBook(flow, {(T, "default", "big"): 1}, {})
    conn = sqlite_store._db.get()
    assert walk_claim(conn, book, ["default"], t0 + 3, 5) is None
    got = sqlite_store.claim("w", ["default"], 5, 60.0, now=t0 + 4, flow=flow)
    assert sorted(j.id for j in got) == [small[0], plain[0]]
