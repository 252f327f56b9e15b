-- Named queries of the PostgreSQL store for operations (issue #11): searching, purging,
-- pausing, forgetting dead workers, reading the leader. None is on the lease hot path.
-- {schema} is the store's schema (see queries.sql: every statement names it).

-- name: create_paused_queues
-- Queues an operator paused (`tether pause`). Made by the first pause or resume, not by a
-- migration: the claim statement, the jobs table and the schema's version stay as they are
-- (workers read this small table every few seconds and leave paused queues out of their
-- claims). Needs the CREATE privilege on the schema, which `tether migrate` needs anyway.
CREATE TABLE IF NOT EXISTS {schema}.paused_queues (
    queue     text        PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT now()
)

-- name: has_paused_queues
-- NULL (no error) while the table has not been made yet.
SELECT to_regclass('{schema}.paused_queues') IS NOT NULL

-- name: search_jobs_desc
-- Newest first: a backward range scan of the primary key from the cursor (keyset pagination
-- costs the same on every page); NULL filters mean "any".
SELECT id, task, queue, payload, status, priority, extract(epoch FROM run_at)::float8,
       attempt, max_attempts, failures, stall_count, max_stalls, interruptions, locked_by,
       extract(epoch FROM lease_until)::float8, extract(epoch FROM created_at)::float8,
       extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8,
       last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors::text, lease_token, replace(uid::text, '-', ''), limit_key,
       snoozes
FROM {schema}.jobs
WHERE id < %(cursor)s::bigint
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(since)s::float8 IS NULL OR created_at >= to_timestamp(%(since)s::float8))
ORDER BY id DESC
LIMIT %(limit)s

-- name: search_jobs_asc
-- Oldest first: the forward range scan from the cursor.
SELECT id, task, queue, payload, status, priority, extract(epoch FROM run_at)::float8,
       attempt, max_attempts, failures, stall_count, max_stalls, interruptions, locked_by,
       extract(epoch FROM lease_until)::float8, extract(epoch FROM created_at)::float8,
       extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8,
       last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors::text, lease_token, replace(uid::text, '-', ''), limit_key,
       snoozes
FROM {schema}.jobs
WHERE id > %(cursor)s::bigint
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(since)s::float8 IS NULL OR created_at >= to_timestamp(%(since)s::float8))
ORDER BY id
LIMIT %(limit)s

-- name: purge
-- One bounded batch of a queue's jobs in the given states; running rows are excluded here as
-- well as refused in Python. SKIP LOCKED: a row a claimer holds this instant is either about
-- to be running (not ours to delete) or is picked up by the next batch.
-- Invariant 6: a deleted job that was not done can never be done, so its waiting children
-- are cancelled (dependency_failed, "ended cancelled", or "ended failed" for a failed one),
-- with their waiting descendants, in this same statement (resolve_links, as in finish: its
-- fresh snapshot sees a child an enqueue linked while this statement waited for the row
-- lock; it announces the children it changes). A deleted job's links as a child go with it
-- ("unlinked").
WITH clock AS (
    SELECT statement_timestamp() AS ts
), doomed AS (
    SELECT id FROM {schema}.jobs
    WHERE queue = %(queue)s AND status <> 'running' AND status = ANY(%(statuses)s::text[])
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM {schema}.jobs j USING doomed d WHERE j.id = d.id
    RETURNING j.id, j.status, j.has_children
), unlinked AS (
    DELETE FROM {schema}.job_links l WHERE l.child_id = ANY(ARRAY(SELECT g.id FROM gone g))
    RETURNING 1
), linked AS (
    -- "unlinked" is read first (its count is always >= 0): it must be done before
    -- resolve_links runs, which would otherwise flip a link this statement deletes after
    -- (a row written by a later command of the same statement cannot be deleted).
    SELECT count({schema}.resolve_links(p.ids, p.ended, c.ts, %(channel)s, %(done)s)) AS n
    FROM (
        SELECT array_agg(g.id) AS ids,
               array_agg(CASE WHEN g.status = 'failed' THEN 'failed' ELSE 'cancelled' END)
                   AS ended
        FROM gone g
        WHERE g.has_children AND g.status <> 'done' AND (SELECT count(*) FROM unlinked) >= 0
        HAVING count(*) > 0
    ) p CROSS JOIN clock c
)
SELECT g.id FROM gone g CROSS JOIN linked

-- name: pause_queue
-- Idempotent: pausing a paused queue changes nothing (no row back). A pause signals every
-- worker ('*' on %(signal)s, delivered at commit) so each re-reads the paused set before its
-- next claim instead of within PAUSE_CHECK_EVERY (issue 22).
WITH paused AS (
    INSERT INTO {schema}.paused_queues (queue) VALUES (%(queue)s) ON CONFLICT (queue) DO NOTHING
    RETURNING queue
)
SELECT p.queue, pg_notify(%(signal)s, '*') FROM paused p

-- name: resume_queue
-- No row back when the queue was not paused.
DELETE FROM {schema}.paused_queues WHERE queue = %(queue)s RETURNING queue

-- name: paused_queues
-- Small table, read by workers every few seconds; ordered for stable display.
SELECT queue FROM {schema}.paused_queues ORDER BY queue

-- name: delete_dead_workers
-- Rows of workers that died without unregistering (SIGKILL, OOM, a lost machine).
DELETE FROM {schema}.workers
WHERE last_seen < coalesce(to_timestamp(%(now)s::float8), statement_timestamp())
                  - %(older_than)s::float8 * interval '1 second'
RETURNING id

-- name: leader
-- The current holder, if its lease has not run out (release clears holder).
SELECT name, holder, term, extract(epoch FROM expires_at)::float8 FROM {schema}.leaders
WHERE name = %(name)s AND holder IS NOT NULL
  AND expires_at > coalesce(to_timestamp(%(now)s::float8), statement_timestamp())
