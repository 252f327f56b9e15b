-- Schema of the SQLite store, version 7 (issue #20, workflows: job dependencies): upgrade steps
-- applied on top of version 6, in file order, in the same transaction as the version row that
-- records them.
--
-- The jobs table is rebuilt: its status CHECK must accept 'waiting', and SQLite cannot alter a
-- CHECK constraint. This is SQLite's documented way to change a table's definition ("Making
-- Other Kinds Of Table Schema Changes", sqlite.org/lang_altertable.html): create the new
-- table, copy the rows, drop the old one, rename the new one, and make its indexes again.
-- (The other documented route, editing sqlite_master under PRAGMA writable_schema, is refused
-- by SQLite's defensive mode and may corrupt the file if done wrong.) It runs inside
-- migrate's one BEGIN IMMEDIATE transaction, so a crash leaves version 6 as it was, and it
-- costs one copy of the table, once. No foreign key, trigger or view refers to jobs. From
-- this version on, the definition of jobs and of its indexes is the one here.

-- name: create_jobs_v7
-- The jobs table of version 6, same columns in the same order (ALTER TABLE appended
-- lease_token, uid, limit_key and snoozes), plus what dependencies need:
-- waiting_on: how many parents have not resolved yet (0 unless waiting), so the finish of a
--   parent decrements a counter instead of counting the child's links (a chord callback over
--   10,000 parents would read them all at each parent's end);
-- allow_failure: NewJob.allow_failure, read when a parent ends failed or cancelled;
-- has_children: set when a job is named in an enqueue's after. finish, reap_expired, cancel,
--   purge and prune read it from the row they already write, so a job without children
--   (every job of an application without workflows) never looks at job_links.
-- The CHECKs hold at the engine level what the code relies on: a running row has an owner and
-- a lease (invariant 1), and a row is waiting exactly while it has a parent to wait for (a
-- waiting row with waiting_on = 0 would never be released).
-- Status tests in the CHECK and in the partial indexes' WHERE below are chains of = joined by
-- OR, not IN lists: SQLite evaluates an IN list of three or more constants through an
-- ephemeral table it builds for each statement, and claim and finish evaluate these terms for
-- every row they write (the CHECK, and each partial index's WHERE on the old and the new row,
-- since they change status). Measured per job in a claim and a finish of 10: adding 'waiting'
-- to version 1's two-value IN of jobs_unique cost 2-5 us (~20 %); the chains make both
-- statements ~10 % cheaper than in version 6.
CREATE TABLE jobs_v7 (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    task             TEXT    NOT NULL,
    queue            TEXT    NOT NULL,
    payload          TEXT    NOT NULL,
    status           TEXT    NOT NULL
                     CHECK (status = 'waiting' OR status = 'pending' OR status = 'running'
                            OR status = 'done' OR status = 'failed' OR status = 'cancelled'),
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
    lease_token      TEXT,
    uid              TEXT,
    limit_key        TEXT,
    snoozes          INTEGER NOT NULL DEFAULT 0,
    waiting_on       INTEGER NOT NULL DEFAULT 0 CHECK (waiting_on >= 0),
    allow_failure    INTEGER NOT NULL DEFAULT 0 CHECK (allow_failure IN (0, 1)),
    has_children     INTEGER NOT NULL DEFAULT 0 CHECK (has_children IN (0, 1)),
    CHECK (status <> 'running' OR (locked_by IS NOT NULL AND lease_until IS NOT NULL)),
    CHECK ((status = 'waiting') = (waiting_on > 0))
)

-- name: copy_jobs
-- Every job of version 6, ids included, in primary-key order (appending to the new b-tree).
-- No job of an older tether has a parent or a child: the new columns keep their defaults.
INSERT INTO jobs_v7 (id, task, queue, payload, status, priority, run_at, attempt, max_attempts,
                     failures, stall_count, max_stalls, interruptions, locked_by, lease_until,
                     created_at, started_at, finished_at, last_error, failure_reason, result,
                     checkpoint, progress, unique_key, cancel_requested, errors, lease_token,
                     uid, limit_key, snoozes)
SELECT id, task, queue, payload, status, priority, run_at, attempt, max_attempts, failures,
       stall_count, max_stalls, interruptions, locked_by, lease_until, created_at, started_at,
       finished_at, last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors, lease_token, uid, limit_key, snoozes
FROM jobs ORDER BY id

-- name: forget_copy_sequence
-- The copy set the new table's AUTOINCREMENT counter to its largest id; the old table's may be
-- higher (the newest jobs were pruned or purged). Step 1 of carrying the old counter over: an
-- id once handed out must never come back (ids are cited in logs and keyset pagination).
DELETE FROM sqlite_sequence WHERE name = 'jobs_v7'

-- name: keep_jobs_sequence
-- Step 2: the old table's counter becomes the new one's (no row when no job was ever made).
-- DROP TABLE deletes the old row, and RENAME moves this one to the name jobs.
INSERT INTO sqlite_sequence (name, seq)
SELECT 'jobs_v7', seq FROM sqlite_sequence WHERE name = 'jobs'

-- name: drop_jobs_v6
-- The old table and, with it, its indexes (made again below, on the new table).
DROP TABLE jobs

-- name: rename_jobs_v7
-- The new table takes the name every statement uses.
ALTER TABLE jobs_v7 RENAME TO jobs

-- name: create_jobs_claim_index
-- As in version 1: due pending jobs of a queue in claim order; waiting jobs are not in it, so
-- a claim never sees them and a backlog of waiting jobs never slows it down.
CREATE INDEX jobs_claim ON jobs (queue, priority, run_at, id) WHERE status = 'pending'

-- name: create_jobs_lease_index
-- As in version 1: running jobs by lease expiry, for the reaper and next_lease_expiry.
CREATE INDEX jobs_lease ON jobs (lease_until) WHERE status = 'running'

-- name: create_jobs_unique_index
-- unique_key is unique among live jobs, and a waiting job is live (NewJob.unique_key: "while
-- a non-terminal job with the same key exists"): version 1's index plus 'waiting'. Rows of
-- version 6 satisfy it (none is waiting). enqueue_find_unique, retry_failed and
-- retry_conflicts repeat this exact WHERE term so that SQLite can use the index.
CREATE UNIQUE INDEX jobs_unique ON jobs (unique_key)
    WHERE (status = 'waiting' OR status = 'pending' OR status = 'running')

-- name: create_jobs_prune_index
-- As in version 1: terminal jobs by finish time, for prune and dead-letter retry. A query term
-- status = 'failed' implies this WHERE (SQLite proves an OR implied by one of its terms);
-- prune, whose status is a parameter, repeats the exact term.
CREATE INDEX jobs_prune ON jobs (status, finished_at)
    WHERE (status = 'done' OR status = 'failed' OR status = 'cancelled')

-- name: create_jobs_flow_index
-- As in version 6: pending keyed jobs, for claims with flow limits.
CREATE INDEX jobs_flow ON jobs (queue, task, limit_key, priority, run_at, id)
    WHERE status = 'pending' AND limit_key IS NOT NULL

-- name: create_job_links
-- One row per (parent, child) of an enqueue's after, written with the child: pos is the
-- parent's place in after (JobLinks.parents and parent_results keep that order; duplicates
-- were removed first). resolved: set once, by the write that ends the parent (or at the
-- child's enqueue when the parent had ended already), so a replayed finish or a dead letter
-- retried and ending again resolves nothing twice. Kept until the CHILD is pruned or purged,
-- so a child still lists a parent pruned before it. WITHOUT ROWID, keyed (child, pos): a
-- child's parents are one range of the table, in after order.
CREATE TABLE job_links (
    child    INTEGER NOT NULL,
    pos      INTEGER NOT NULL,
    parent   INTEGER NOT NULL,
    resolved INTEGER NOT NULL DEFAULT 0 CHECK (resolved IN (0, 1)),
    PRIMARY KEY (child, pos)
) WITHOUT ROWID

-- name: create_job_links_parent_index
-- A parent's links: what its end resolves, what JobLinks.children lists (ascending child ids,
-- the index order), and what prune checks before deleting a parent.
CREATE INDEX job_links_parent ON job_links (parent, child)
