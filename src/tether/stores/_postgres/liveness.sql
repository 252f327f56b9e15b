-- Named queries of the PostgreSQL store for death detection (issue #22). {schema} is the
-- store's schema. A token is a session advisory lock (pg_try_advisory_lock(lock_key)) held by
-- the worker on its own connection, exclusive, until that session ends.

-- name: live_token_lock
-- Taken on the worker's dedicated session connection: held until the session ends.
SELECT pg_try_advisory_lock(%(key)s::bigint)

-- name: live_token_put
-- Recorded after the lock is held, so a checker never sees a row whose lock is not yet taken.
-- A repeat (the connection was cut and the token re-taken under a new key) replaces the key.
INSERT INTO {schema}.live_tokens (worker_id, lock_key)
VALUES (%(worker)s, %(key)s::bigint)
ON CONFLICT (worker_id) DO UPDATE SET lock_key = EXCLUDED.lock_key, reaped = false,
                                      taken_at = now()

-- name: live_token_unlock
-- Release: the worker counts as dead from now on (the row stays; see the role's docstring).
SELECT pg_advisory_unlock(%(key)s::bigint)

-- name: dead_owners
-- The sub-second check, one statement: the workers whose token is not held any more (skipping
-- those already reaped) and the current leases of the given elections whose holder's token
-- is gone. A token is probed by asking for a *shared* transaction-level lock on its key: the
-- holder's exclusive session lock refuses it while the holder's session lives; granted, it is
-- released when this statement's transaction ends. Not pg_locks: reading it takes every
-- lock-manager partition lock (and every backend's fast-path lock) at once, which, several
-- times a second from every maintainer, stalled everyone's statements (measured: a drain
-- beside 20 idle workers ran a third slower). Probing costs one lock-table lookup per live token.
-- Two checkers' shared probes never conflict; a holder re-taking its token meanwhile just
-- draws another key (liveness.py). The holder string is the worker id, then " settings=..."
-- (tether.stores._liveness). A token taken before the server last started is not judged: a
-- restart ends every session, and a live worker needs a moment to take its token again (its
-- watcher does, at once); until it has, the lease decides, so a server restart never makes
-- every running job look orphaned.
WITH dead AS MATERIALIZED (
    SELECT t.worker_id, t.reaped FROM {schema}.live_tokens t
    WHERE t.reaped OR (t.taken_at >= pg_postmaster_start_time()
                       AND pg_try_advisory_xact_lock_shared(t.lock_key))
)
SELECT 'worker', d.worker_id, NULL::text, NULL::bigint, NULL::float8
FROM dead d WHERE NOT d.reaped
UNION ALL
SELECT 'leader', l.name, l.holder, l.term, extract(epoch FROM l.expires_at)::float8
FROM {schema}.leaders l JOIN dead d ON d.worker_id = split_part(l.holder, ' settings=', 1)
WHERE l.name = ANY(%(elections)s::text[]) AND l.holder IS NOT NULL

-- name: dead_workers
-- Which of the given workers took a token that is no longer held (stats, dashboard): the
-- probe of dead_owners; a token from before the server's last start is not judged.
SELECT t.worker_id FROM {schema}.live_tokens t
WHERE t.worker_id = ANY(%(workers)s::text[])
  AND (t.reaped OR (t.taken_at >= pg_postmaster_start_time()
                    AND pg_try_advisory_xact_lock_shared(t.lock_key)))

-- name: forget_tokens
-- The tokens of workers whose rows delete_dead_workers removed (or never had one), once
-- reaped: nothing is left to check or to match.
DELETE FROM {schema}.live_tokens t
WHERE t.reaped AND t.taken_at < statement_timestamp() - %(older_than)s::float8 * interval '1 second'
  AND NOT EXISTS (SELECT 1 FROM {schema}.workers w WHERE w.id = t.worker_id)

-- name: reap_dead
-- The reaper's statement (queries.sql, reap_expired) with the jobs selected by owner instead
-- of by expiry: the caller found these owners' tokens released, so their running jobs come
-- back now whatever their leases say. Everything else is reap_expired's, for its reasons (read
-- them there): the stall rule, a requested cancel sticks, run_at kept, the token cleared, the
-- error record carrying the old owner, links resolved (invariant 6), queues woken and ended
-- jobs announced in the same statement. One addition: when fewer than LIMIT rows moved, every
-- job of these owners is back, so their tokens are marked reaped and the sub-second check
-- stops probing them (the "marked" CTE; a data-modifying CTE runs even if not read).
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
), due AS (
    -- Selected by owner instead of by expiry; the partial reap index holds exactly the
    -- running rows, so this reads the running jobs, not the table. status = 'running' and
    -- locked_by are the fence (re-checked under the row lock): a job the owner finished, or
    -- that another worker re-claimed, is not touched.
    SELECT id, attempt, locked_by FROM {schema}.jobs
    WHERE status = 'running' AND lease_until IS NOT NULL
      AND locked_by = ANY(%(owners)s::text[])
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), records AS MATERIALIZED (
    SELECT count(*) <= 64 AS small,
           jsonb_object_agg(p.attempt || ':' || p.locked_by, jsonb_build_array(
               jsonb_build_object('attempt', p.attempt, 'error', %(error)s::text,
                                  'reason', 'stalled', 'at', extract(epoch FROM c.ts)::float8,
                                  'owner', p.locked_by))) AS by_lease
    FROM (SELECT DISTINCT attempt, locked_by FROM due LIMIT 65) p CROSS JOIN clock c
), moved AS (
UPDATE {schema}.jobs j
SET stall_count = j.stall_count + 1,
    status = CASE
        WHEN j.cancel_requested THEN 'cancelled'
        WHEN j.stall_count + 1 < j.max_stalls
         AND j.failures + j.stall_count + 1 < j.max_attempts THEN 'pending'
        ELSE 'failed'
    END,
    failure_reason = CASE
        WHEN j.cancel_requested
          OR (j.stall_count + 1 < j.max_stalls
              AND j.failures + j.stall_count + 1 < j.max_attempts) THEN j.failure_reason
        ELSE 'stalled'
    END,
    finished_at = CASE
        WHEN NOT j.cancel_requested
         AND j.stall_count + 1 < j.max_stalls
         AND j.failures + j.stall_count + 1 < j.max_attempts THEN j.finished_at
        ELSE c.ts
    END,
    last_error = %(error)s,
    errors = j.errors || CASE
        WHEN r.small THEN r.by_lease -> (d.attempt || ':' || d.locked_by)
        ELSE jsonb_build_array(jsonb_build_object(
            'attempt', d.attempt, 'error', %(error)s::text, 'reason', 'stalled',
            'at', extract(epoch FROM c.ts)::float8, 'owner', d.locked_by))
    END,
    locked_by = NULL,
    lease_until = NULL,
    lease_token = NULL
FROM due d CROSS JOIN clock c CROSS JOIN records r
-- By primary key only. The CTE holds FOR UPDATE locks on exactly these rows, so nobody can
-- have changed them since it re-checked them; repeating "status = 'running'" here let the
-- planner (with statistics taken while few jobs ran) probe the partial reap index per row and
-- go quadratic: 9,000 expired leases took 7.5 s instead of milliseconds.
WHERE j.id = d.id
RETURNING j.id, j.attempt, d.locked_by, j.status, j.stall_count, j.queue, j.has_children
), linked AS (
    -- Invariant 6: a job this reap ended (failed, or cancelled) resolves its links in the
    -- same statement, as in finish: its waiting children are cancelled (or, with
    -- allow_failure, count it as resolved).
    SELECT count({schema}.resolve_links(p.ids, p.ended, c.ts, %(channel)s, %(done)s)) AS n
    FROM (
        SELECT array_agg(m.id) AS ids, array_agg(m.status) AS ended
        FROM moved m
        WHERE m.has_children AND m.status <> 'pending'
        HAVING count(*) > 0
    ) p CROSS JOIN clock c
), woke AS (
    SELECT count(pg_notify(%(channel)s, q.queue)) AS n
    FROM (SELECT DISTINCT queue FROM moved WHERE status = 'pending') q
), ended AS (
    SELECT count(pg_notify(%(done)s, CASE WHEN length(e.ids) <= 7900 THEN e.ids ELSE '*' END))
    FROM (SELECT string_agg(m.id::text, ',') AS ids FROM moved m
          WHERE m.status <> 'pending') e
    WHERE e.ids IS NOT NULL
), marked AS (
    UPDATE {schema}.live_tokens t SET reaped = true
    WHERE t.worker_id = ANY(%(owners)s::text[]) AND NOT t.reaped
      AND (SELECT count(*) FROM moved) < %(limit)s
    RETURNING 1
)
SELECT m.id, m.attempt, m.locked_by, m.status, m.stall_count
FROM moved m CROSS JOIN woke CROSS JOIN ended CROSS JOIN linked
