-- Named queries of the SQLite store for operations (issue #11): searching, purging, pausing,
-- forgetting dead workers, reading the leader. None of them is on the lease hot path.
-- Job rows use the column list of ``JobRecord`` in field order, like queries.sql.

-- name: create_paused_queues
-- Queues an operator paused (``tether pause``): workers leave them out of their claims. Made
-- by the first pause (in that write), not by a schema version: the claim statement, the jobs
-- table and the schema's version stay as they are, and a database without it has no paused
-- queue.
CREATE TABLE IF NOT EXISTS paused_queues (
    queue     TEXT PRIMARY KEY,
    paused_at REAL NOT NULL
)

-- name: search_jobs_desc
-- Newest first: a backwards range scan of the primary key from the cursor; (:x IS NULL OR ...)
-- keeps one fixed statement for every filter combination.
SELECT id, task, queue, payload, status, priority, run_at, attempt, max_attempts, failures,
       stall_count, max_stalls, interruptions, locked_by, lease_until, created_at, started_at,
       finished_at, last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors, lease_token, uid, limit_key, snoozes
FROM jobs
WHERE id < :cursor
  AND (:status IS NULL OR status = :status)
  AND (:queue IS NULL OR queue = :queue)
  AND (:task IS NULL OR task = :task)
  AND (:since IS NULL OR created_at >= :since)
ORDER BY id DESC
LIMIT :limit

-- name: search_jobs_asc
-- Oldest first: the forward range scan from the cursor.
SELECT id, task, queue, payload, status, priority, run_at, attempt, max_attempts, failures,
       stall_count, max_stalls, interruptions, locked_by, lease_until, created_at, started_at,
       finished_at, last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors, lease_token, uid, limit_key, snoozes
FROM jobs
WHERE id > :cursor
  AND (:status IS NULL OR status = :status)
  AND (:queue IS NULL OR queue = :queue)
  AND (:task IS NULL OR task = :task)
  AND (:since IS NULL OR created_at >= :since)
ORDER BY id
LIMIT :limit

-- name: purge
-- One bounded batch of a queue's jobs in the given states (a JSON array); running rows are
-- excluded here as well as refused in Python. Deleting a live row frees its unique key (the
-- partial unique index only holds live rows). RETURNING (the deleted rows' values): Python
-- drops their links as a child and, for a deleted job with children that had not ended, cancels
-- its waiting children (links.sql), in the same transaction.
DELETE FROM jobs WHERE id IN (
    SELECT id FROM jobs
    WHERE queue = :queue AND status <> 'running'
      AND status IN (SELECT value FROM json_each(:statuses))
    LIMIT :limit
)
RETURNING id, status, has_children

-- name: pause_queue
INSERT INTO paused_queues (queue, paused_at) VALUES (:queue, :now)
ON CONFLICT (queue) DO NOTHING

-- name: resume_queue
DELETE FROM paused_queues WHERE queue = :queue

-- name: paused_queues
SELECT queue FROM paused_queues ORDER BY queue

-- name: delete_dead_workers
-- Rows of workers that died without unregistering (SIGKILL, OOM, a lost machine).
DELETE FROM workers WHERE last_seen < :now - :older_than

-- name: leader
-- The current holder, if its lease has not run out (release clears holder).
SELECT name, holder, term, expires_at FROM leaders
WHERE name = :name AND holder IS NOT NULL AND expires_at > :now
