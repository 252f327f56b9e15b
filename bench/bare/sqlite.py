"""The bare SQLite loop (stdlib sqlite3, WAL, synchronous=NORMAL as tether) over its own table
in the run's database file."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from bench.bare import BareResult, Heartbeat, Held, seed_with_tether, timed
from bench.common import sqlite_path

# The table: what the protocol needs and nothing more; run_at and lease_until are epoch seconds.
TABLE = """
CREATE TABLE IF NOT EXISTS bare_loop (
    id          INTEGER PRIMARY KEY,
    payload     TEXT    NOT NULL,
    status      TEXT    NOT NULL DEFAULT 'pending',
    run_at      REAL    NOT NULL,
    attempt     INTEGER NOT NULL DEFAULT 0,
    token       TEXT,
    lease_until REAL
);
CREATE INDEX IF NOT EXISTS bare_loop_claim ON bare_loop (run_at, id) WHERE status = 'pending';
"""

# Claim: a batch in one statement, setting the lease, attempt + 1 and this claim's token (one
# writer at a time in SQLite, so no SKIP LOCKED is needed).
CLAIM = """
UPDATE bare_loop SET status = 'running', token = ?, lease_until = ?, attempt = attempt + 1
WHERE id IN (SELECT id FROM bare_loop WHERE status = 'pending' AND run_at <= ?
             ORDER BY run_at, id LIMIT ?)
RETURNING id, attempt, payload
"""

# Finish: one transaction for the batch, each row fenced by id + attempt + token.
FINISH = """
UPDATE bare_loop SET status = 'done', token = NULL, lease_until = NULL
WHERE id = ? AND attempt = ? AND token = ? AND status = 'running'
"""

# Heartbeat: renew one held lease whose token still matches (all in one transaction).
RENEW = "UPDATE bare_loop SET lease_until = ? WHERE id = ? AND token = ? AND status = 'running'"


# The same protocol on tether's own ``jobs`` table (rows enqueued by tether): what that table,
# its 36 columns, CHECKs and five indexes, costs the same statements (issue #23). The claim
# reads tether's claim index (queue, priority, run_at, id); running rows need locked_by.
JOBS_CLAIM = """
UPDATE jobs SET status = 'running', lease_token = ?, lease_until = ?, attempt = attempt + 1,
    locked_by = 'bare'
WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' AND queue = 'default' AND run_at <= ?
             ORDER BY priority, run_at, id LIMIT ?)
RETURNING id, attempt, payload
"""
JOBS_FINISH = """
UPDATE jobs SET status = 'done', lease_token = NULL, lease_until = NULL, locked_by = NULL,
    finished_at = ?2
WHERE id = ?3 AND attempt = ?4 AND lease_token = ?1 AND status = 'running'
"""
JOBS_RENEW = ("UPDATE jobs SET lease_until = ? WHERE id = ? AND lease_token = ? "
              "AND status = 'running'")


def connect(path: str) -> sqlite3.Connection:
    """Autocommit connection with tether's pragmas (WAL, synchronous=NORMAL, busy timeout)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def drain(url: str, n: int, batch: int, heartbeat_every: float) -> BareResult:
    """The loop over its own slim table, seeded here."""
    path = sqlite_path(url)
    conn = connect(path)
    try:
        conn.executescript(TABLE)
        conn.execute("DELETE FROM bare_loop")
        now = time.time()
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO bare_loop (payload, run_at) VALUES ('[[], {}]', ?)",
                         ((now,) for _ in range(n)))
        conn.execute("COMMIT")
        result = _loop(path, n, batch, heartbeat_every, (CLAIM, FINISH, RENEW),
                       lambda token, now, rows: ((r[0], r[1], token) for r in rows))
        conn.execute("DROP TABLE bare_loop")
    finally:
        conn.close()
    return result


def drain_jobs(url: str, n: int, batch: int, heartbeat_every: float) -> BareResult:
    """The loop over tether's ``jobs`` table, its rows enqueued by tether (not timed)."""
    seed_with_tether(url, n)
    return _loop(sqlite_path(url), n, batch, heartbeat_every,
                 (JOBS_CLAIM, JOBS_FINISH, JOBS_RENEW),
                 lambda token, now, rows: ((token, now, r[0], r[1]) for r in rows))


def _loop(path: str, n: int, batch: int, heartbeat_every: float, sql: tuple[str, str, str],
          finish_args: Callable[[str, float, list[Any]], Iterable[tuple[Any, ...]]]
          ) -> BareResult:
    """Claim, no-op handlers, fenced batch finish in one transaction, until nothing is left;
    a heartbeat thread on its own connection renews what is held."""
    claim, finish, renew = sql
    conn, beat_conn = connect(path), connect(path)
    try:
        held = Held()

        def beat(items: dict[int, object]) -> None:
            until = time.time() + 30.0
            beat_conn.execute("BEGIN IMMEDIATE")
            beat_conn.executemany(renew, ((until, i, t) for i, t in items.items()))
            beat_conn.execute("COMMIT")

        def loop() -> int:
            done = 0
            while True:
                token = uuid.uuid4().hex
                now = time.time()
                rows = conn.execute(claim, (token, now + 30.0, now, batch)).fetchall()
                if not rows:
                    return done
                ids = [r[0] for r in rows]
                held.add(ids, token)
                for r in rows:  # the no-op "handlers"
                    _ = r[2]
                conn.execute("BEGIN IMMEDIATE")
                cur = conn.executemany(finish, finish_args(token, time.time(), rows))
                done += cur.rowcount
                conn.execute("COMMIT")
                held.drop(ids)

        hb = Heartbeat(held, beat, heartbeat_every)
        hb.start()
        try:
            return timed(loop, n)
        finally:
            hb.stop()
    finally:
        conn.close()
        beat_conn.close()
