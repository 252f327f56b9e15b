-- Named queries of a SQLite claim with flow limits (issue #19), run by flow.py inside the
-- claim's BEGIN IMMEDIATE transaction: the write lock serialises limited claimers, so two never
-- take a group's last slot. Python walks the candidates (tether.stores._flow); these statements
-- read what the store holds and write the grant. A claim without flow never runs any of them.

-- name: flow_running
-- The slots in use: running jobs per (task, queue, limit_key), every one, expired lease or
-- not (only leaving 'running' frees a slot). Reads the running rows only (as many as jobs in
-- flight), through the partial index jobs_lease. One JSON array in one row: Python gets it
-- in one step of the statement, where a row per group gives the GIL away once per group
-- while this claim holds the write lock (and waits for it back behind the handler threads).
SELECT json_group_array(json_array(task, queue, limit_key, n)) FROM (
    SELECT task, queue, limit_key, count(*) AS n FROM jobs INDEXED BY jobs_lease
    WHERE status = 'running'
    GROUP BY task, queue, limit_key
)

-- name: flow_started
-- Starts recorded in (since, now] per group of one rate limit: its one group or, per key,
-- every group in [lo, hi). A range scan of flow_starts_group.
SELECT grp, count(*) FROM flow_starts
WHERE grp >= :lo AND grp < :hi AND at > :since AND at <= :now
GROUP BY grp

-- name: flow_unkeyed
-- The jobs without a key: they are not in jobs_flow (see schema_v6.sql), so they are read from
-- jobs_claim in claim order, looking at most :horizon due jobs of the queue (the bound the
-- contract lets a store document; keyed jobs in the way count towards it). Tasks whose unkeyed
-- jobs cannot be taken in this claim (:shut, a JSON array) are left out, and at most :limit
-- jobs per task come back (jobs of one task are alike for every limit, so more could never be
-- taken).
SELECT id, priority, run_at, task FROM (
    SELECT id, priority, run_at, task,
           row_number() OVER (PARTITION BY task ORDER BY priority, run_at, id) AS n
    FROM (
        SELECT id, priority, run_at, task, limit_key FROM jobs INDEXED BY jobs_claim
        WHERE queue = :queue AND status = 'pending' AND run_at <= :now
        ORDER BY priority, run_at, id
        LIMIT :horizon
    )
    WHERE limit_key IS NULL AND task NOT IN (SELECT value FROM json_each(:shut))
)
WHERE n <= :limit

-- name: flow_walk
-- The queue's due jobs in claim order through jobs_claim (the plain claim's index and order),
-- for Python to read only as far as it needs: flow_walk.py takes the claim from them as they
-- come and stops when it is full or after its bound of :limit rows (then the keyed groups are
-- read through jobs_flow instead); _unkeyed_before keeps the ones without a key, up to where
-- the keyed groups' first jobs fill the claim.
SELECT priority, run_at, id, task, limit_key, queue FROM jobs INDEXED BY jobs_claim
WHERE queue = :queue AND status = 'pending' AND run_at <= :now
ORDER BY priority, run_at, id
LIMIT :limit

-- name: flow_first_group
-- The loose index scan over jobs_flow, step 1: the first (task, limit_key) with keyed pending
-- jobs in the queue (every text is >= ''). One seek.
SELECT task, limit_key FROM jobs INDEXED BY jobs_flow
WHERE status = 'pending' AND limit_key IS NOT NULL AND queue = :queue AND task >= ''
ORDER BY task, limit_key LIMIT 1

-- name: flow_next_key
-- The next key of the task after :after: one seek past the whole backlog of the key before
-- it, however long it is.
SELECT limit_key FROM jobs INDEXED BY jobs_flow
WHERE status = 'pending' AND limit_key IS NOT NULL AND queue = :queue AND task = :task
  AND limit_key > :after
ORDER BY limit_key LIMIT 1

-- name: flow_next_task
-- The first keyed group of the next task after :after (one seek past all its jobs).
SELECT task, limit_key FROM jobs INDEXED BY jobs_flow
WHERE status = 'pending' AND limit_key IS NOT NULL AND queue = :queue AND task > :after
ORDER BY task, limit_key LIMIT 1

-- name: flow_heads
-- The first :limit due jobs of one keyed (queue, task, limit_key) group in (priority, run_at,
-- id) order: only groups with room are read, so a key at its limit costs nothing here.
SELECT id, priority, run_at FROM jobs INDEXED BY jobs_flow
WHERE status = 'pending' AND limit_key IS NOT NULL AND queue = :queue AND task = :task
  AND limit_key = :key AND run_at <= :now
ORDER BY priority, run_at, id
LIMIT :limit

-- name: flow_claim
-- The lease grant of the jobs Python chose (:ids, a JSON array), set exactly as the plain
-- claim sets it; status = 'pending' re-checks each row under the same write lock.
-- OR FAIL, not the default ABORT: with ABORT SQLite keeps a statement journal (the original
-- of every page the statement changes, so it can undo the statement alone), and a claim of
-- keyed jobs changes a page of jobs_flow per key (each key's jobs sit together there): past
-- 64 KiB the journal spills to a temporary file, opened, written and deleted by every claim,
-- which made this statement cost half again as much. Undoing the statement alone is never
-- needed: it runs inside the claim's transaction, which any error rolls back whole
-- (Connections.write), and nothing here can break a constraint (a pending job's unique_key
-- stays live as it becomes running; were one broken, the statement would still fail, and the
-- claim with it).
UPDATE OR FAIL jobs
SET status = 'running',
    locked_by = :owner,
    lease_until = :now + :lease_ttl,
    attempt = attempt + 1,
    started_at = :now,
    cancel_requested = 0,
    lease_token = :nonce || ':' || id
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'pending'
RETURNING id, task, queue, payload, status, priority, run_at, attempt, max_attempts, failures,
          stall_count, max_stalls, interruptions, locked_by, lease_until, created_at, started_at,
          finished_at, last_error, failure_reason, result, checkpoint, progress, unique_key,
          cancel_requested, errors, lease_token, uid, limit_key, snoozes

-- name: flow_record_starts
-- One start per claimed job and rate group (:groups, a JSON array, repeats kept), at the
-- claim's time, in the claim's transaction: the window counts exactly the committed claims.
INSERT INTO flow_starts (grp, at) SELECT value, :now FROM json_each(:groups)

-- name: flow_drop_starts
-- A group's starts older than its longest window can never count again: dropped by the claim
-- that records a new one, so the log stays as small as the windows (a seek and a short range).
DELETE FROM flow_starts WHERE grp = :grp AND at <= :horizon

-- name: flow_group_heads
-- Every keyed (task, limit_key) group of the queue with its first due job, in ONE statement: a
-- loose index scan of jobs_flow done by SQLite itself (a recursive CTE, one seek per group:
-- the first due entry after the previous group is the next group's head, since the index
-- orders each group's jobs by (priority, run_at, id)). Each step seeks the next key of the
-- same task, else the first group of the next task (two range seeks: SQLite does not use
-- the index for a row-value range here, which scanned the task's whole backlog per step).
-- What a claim needs when every group's first job fills it; flow.py walks the groups one by
-- one otherwise.
WITH RECURSIVE head(id) AS (
    SELECT (SELECT id FROM jobs INDEXED BY jobs_flow
            WHERE status = 'pending' AND limit_key IS NOT NULL AND queue = :queue
              AND task >= '' AND run_at <= :now
            ORDER BY task, limit_key, priority, run_at, id LIMIT 1)
    UNION ALL
    SELECT coalesce(
        (SELECT n.id FROM jobs AS n INDEXED BY jobs_flow
         WHERE n.status = 'pending' AND n.limit_key IS NOT NULL AND n.queue = :queue
           AND n.task = j.task AND n.limit_key > j.limit_key AND n.run_at <= :now
         ORDER BY n.limit_key, n.priority, n.run_at, n.id LIMIT 1),
        (SELECT n.id FROM jobs AS n INDEXED BY jobs_flow
         WHERE n.status = 'pending' AND n.limit_key IS NOT NULL AND n.queue = :queue
           AND n.task > j.task AND n.run_at <= :now
         ORDER BY n.task, n.limit_key, n.priority, n.run_at, n.id LIMIT 1))
    FROM head JOIN jobs AS j ON j.id = head.id
)
SELECT j.id, j.task, j.limit_key, j.priority, j.run_at
FROM head JOIN jobs AS j ON j.id = head.id
