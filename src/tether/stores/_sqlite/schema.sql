-- Schema of the SQLite store, version 1 (later versions: schema_v2.sql, ...). ``migrate()`` runs
-- these blocks in file order, then every newer version's file, inside one ``BEGIN IMMEDIATE``
-- transaction (not ``executescript``, which would commit early), so several processes may migrate
-- at once: the write lock serialises them, and the version read inside it picks the steps.

-- name: create_jobs
-- One row per job; every field of ``JobRecord``. Times are REAL epoch seconds from the store's
-- clock. AUTOINCREMENT so a pruned id is never handed out again (ids are cited in logs and
-- keyset pagination). The table CHECK holds invariant 1 of the contract at the engine level: a
-- running row always has an owner and a lease.
CREATE TABLE IF NOT EXISTS jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    task             TEXT    NOT NULL,
    queue            TEXT    NOT NULL,
    payload          TEXT    NOT NULL,
    status           TEXT    NOT NULL
                     CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled')),
    priority         INTEGER NOT NULL DEFAULT 0,
    run_at           REAL    NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL CHECK (max_attempts > 0),
    failures         INTEGER NOT NULL DEFAULT 0,
    stall_count      INTEGER NOT NULL DEFAULT 0,
    max_stalls       INTEGER NOT NULL CHECK (max_stalls >= 0),
    interruptions    INTEGER NOT NULL DEFAULT 0,
    locked_by        TEXT,
    lease_until      REAL,
    created_at       REAL    NOT NULL,
    started_at       REAL,
    finished_at      REAL,
    last_error       TEXT,
    failure_reason   TEXT,
    result           TEXT,
    checkpoint       TEXT,
    progress         TEXT,
    unique_key       TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    errors           TEXT    NOT NULL DEFAULT '[]',
    CHECK (status <> 'running' OR (locked_by IS NOT NULL AND lease_until IS NOT NULL))
)

-- name: create_jobs_claim_index
-- The claim hot path: due pending jobs of a queue in (priority, run_at, id) order. Partial, so
-- the index holds only the backlog and finished history never slows a claim down.
CREATE INDEX IF NOT EXISTS jobs_claim ON jobs (queue, priority, run_at, id)
    WHERE status = 'pending'

-- name: create_jobs_lease_index
-- The reaper and next_lease_expiry: running jobs by lease expiry; partial, so it is as small as
-- the number of jobs in flight.
CREATE INDEX IF NOT EXISTS jobs_lease ON jobs (lease_until) WHERE status = 'running'

-- name: create_jobs_unique_index
-- unique_key is unique among live (pending/running) jobs only: a finished job frees its key.
-- enqueue looks the key up first; the index makes that a point lookup and backs it with a
-- hard guarantee.
CREATE UNIQUE INDEX IF NOT EXISTS jobs_unique ON jobs (unique_key)
    WHERE status IN ('pending', 'running')

-- name: create_jobs_prune_index
-- prune (status, finished before a cutoff) and dead-letter retry (status = 'failed'). Partial
-- on the terminal statuses, so the planner can never pick it for a pending/running lookup (the
-- hot paths must use jobs_claim, jobs_lease or the primary key). Queries that want it repeat
-- the exact WHERE term, which is how SQLite proves a partial index usable.
CREATE INDEX IF NOT EXISTS jobs_prune ON jobs (status, finished_at)
    WHERE status IN ('done', 'failed', 'cancelled')

-- name: create_workers
-- One row per worker incarnation; queues is a JSON array. last_seen is touched by heartbeat.
CREATE TABLE IF NOT EXISTS workers (
    id          TEXT    PRIMARY KEY,
    host        TEXT    NOT NULL,
    pid         INTEGER NOT NULL,
    queues      TEXT    NOT NULL,
    concurrency INTEGER NOT NULL,
    started_at  REAL    NOT NULL,
    last_seen   REAL    NOT NULL
)

-- name: create_leaders
-- Leader leases. The row is never deleted (release only clears holder) so term keeps growing
-- across acquisitions and stays a valid fence token.
CREATE TABLE IF NOT EXISTS leaders (
    name       TEXT    PRIMARY KEY,
    holder     TEXT,
    term       INTEGER NOT NULL,
    expires_at REAL    NOT NULL
)

-- name: create_schema_version
-- Which schema versions are applied; check_schema refuses a version newer than the code.
CREATE TABLE IF NOT EXISTS schema_version (
    version    INTEGER PRIMARY KEY,
    applied_at REAL    NOT NULL
)
