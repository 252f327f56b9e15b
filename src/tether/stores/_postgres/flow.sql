-- Named queries of a PostgreSQL claim with flow limits (issue #19), run by flow.py in ONE
-- transaction on one connection (so it works through PgBouncer's transaction pooling: no
-- session state, no session lock). A claim without flow never runs any of them: it is the
-- plain claim statement of queries.sql, unchanged. Conventions as in queries.sql; here the
-- claim's time (%(now)s) is always given, read once by flow_lock, so every statement of the
-- claim agrees on it.

-- name: flow_lock
-- Serialises limited claims of the schema (two never take a group's last slot): a
-- transaction-level advisory lock, released by the commit, so a pooler may hand the server
-- connection on afterwards. Taken BEFORE the statements that count running rows and starts:
-- each of those is a new statement under READ COMMITTED, so it sees everything the previous
-- holder committed. Returns the claim's time (the caller's now, else the database clock).
SELECT pg_advisory_xact_lock(%(key)s::bigint),
       coalesce(%(now)s::float8, extract(epoch FROM statement_timestamp())::float8)

-- name: flow_prior
-- A replayed limited claim (same request id; its reply was lost): the jobs still running under
-- its nonce and owner (one probe of jobs_nonce_idx), and whether it was recorded as granted
-- (one primary-key probe of requests). Either way it claims nothing more, as the plain claim.
SELECT id, task, queue, payload, status, priority, extract(epoch FROM run_at)::float8,
       attempt, max_attempts, failures, stall_count, max_stalls, interruptions, locked_by,
       extract(epoch FROM lease_until)::float8, extract(epoch FROM created_at)::float8,
       extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8,
       last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors::text, lease_token, replace(uid::text, '-', ''), limit_key,
       snoozes,
       true
FROM {schema}.jobs
WHERE left(lease_token, -strpos(reverse(lease_token), ':')) = %(nonce)s::text
  AND status = 'running' AND locked_by = %(owner)s::text
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, false
FROM {schema}.requests WHERE id = %(request)s::text

-- name: flow_running
-- The slots in use: running jobs per (task, queue, limit_key), every one, its lease expired or
-- not (only leaving 'running' frees a slot). Only the tasks and queues a limit names: the
-- running set through jobs_reap_idx, as many rows as jobs in flight.
SELECT task, queue, limit_key, count(*) FROM {schema}.jobs
WHERE status = 'running'
  AND (task = ANY(%(tasks)s::text[]) OR queue = ANY(%(queues)s::text[]))
GROUP BY task, queue, limit_key

-- name: flow_started
-- Starts recorded in (now - per, now] per group of each rate limit (i: its index in flow):
-- its one group, or every per-key group in [lo, hi) (bytewise: grp is COLLATE "C"). A range
-- scan of flow_starts_idx per limit.
SELECT r.i, f.grp, count(*)
FROM unnest(%(idx)s::int[], %(lo)s::text[], %(hi)s::text[], %(per)s::float8[])
    AS r(i, lo, hi, per)
JOIN {schema}.flow_starts f
  ON f.grp >= r.lo AND f.grp < r.hi
 AND f.at > to_timestamp(%(now)s::float8) - r.per * interval '1 second'
 AND f.at <= to_timestamp(%(now)s::float8)
GROUP BY r.i, f.grp

-- name: flow_groups
-- Every (queue, task, key) with pending jobs in the claimed queues: a loose index scan of
-- jobs_flow_idx (recursive CTE), one seek per group past however long its backlog, never a
-- read of the backlog itself. Per queue, "queue = q AND (task, key) > (...)": with "queue =
-- ANY(...)", or with queue inside the row comparison next to "queue = q", the row comparison
-- was no start key and each step read the queue's backlog from its start (169 buffers for
-- 10,000 jobs of one key; 3 this way, measured). Keys are spelled as in the index: '' for no
-- key, '=' || key;
-- "run_at > '-infinity'" (always true) names the index's predicate (see 0006).
WITH RECURSIVE g(queue, task, fkey) AS (
    SELECT f.queue, f.task, f.fkey
    FROM unnest(%(queues)s::text[]) AS q(queue)
    CROSS JOIN LATERAL (
        SELECT queue, task, coalesce('=' || limit_key, '') AS fkey FROM {schema}.jobs
        WHERE status = 'pending' AND run_at > '-infinity' AND queue = q.queue
        ORDER BY queue, task, coalesce('=' || limit_key, '')
        LIMIT 1
    ) f
    UNION ALL
    SELECT n.queue, n.task, n.fkey FROM g CROSS JOIN LATERAL (
        SELECT queue, task, coalesce('=' || limit_key, '') AS fkey FROM {schema}.jobs
        WHERE status = 'pending' AND run_at > '-infinity' AND queue = g.queue
          AND (task, coalesce('=' || limit_key, '')) > (g.task, g.fkey)
        ORDER BY queue, task, coalesce('=' || limit_key, '')
        LIMIT 1
    ) n
)
SELECT queue, task, fkey FROM g

-- name: flow_heads
-- The first due jobs of each group with room, in (priority, run_at, id) order, at most its
-- remaining room (cap, at most the claim's limit): one index range of jobs_flow_idx per
-- group. A group at its limit is not asked for at all, so a blocked key's backlog costs
-- nothing here. No lock: flow_take re-checks status under the advisory lock.
SELECT h.id, h.priority, extract(epoch FROM h.run_at)::float8, g.task, g.queue, g.fkey
FROM unnest(%(queues)s::text[], %(tasks)s::text[], %(fkeys)s::text[], %(caps)s::int[])
    AS g(queue, task, fkey, cap)
CROSS JOIN LATERAL (
    SELECT id, priority, run_at FROM {schema}.jobs
    WHERE status = 'pending' AND run_at > '-infinity' AND queue = g.queue AND task = g.task
      AND coalesce('=' || limit_key, '') = g.fkey
      AND run_at <= to_timestamp(%(now)s::float8)
    ORDER BY priority, run_at, id
    LIMIT g.cap
) h

-- name: flow_take
-- The lease grant of the jobs flow.py chose, set exactly as the plain claim sets it; "picked"
-- locks each row by primary key and re-checks its status on the newest version (a plain claim
-- of another worker may have taken it meanwhile). In the same statement and transaction: the
-- request record (replay, as in claim), one start per taken job and rate group (joined to what
-- was really taken, so a row lost to a plain claim records nothing), and the drop of the
-- starts of those groups older than their longest window (the log stays as small as the
-- windows). Both end with the transaction, at the same commit as the grant.
WITH clock AS (
    SELECT to_timestamp(%(now)s::float8) AS ts
), picked AS (
    -- By primary key only, locked; the status is checked on what the lock returns (the newest
    -- version). "j.status = 'pending'" in the UPDATE let the planner read the whole pending
    -- index for the join instead (seen: 10,000 rows for 110 ids, 14 ms on a fresh table).
    SELECT id, status FROM {schema}.jobs WHERE id = ANY(%(ids)s::bigint[]) FOR UPDATE
), claimed AS (
    UPDATE {schema}.jobs j
    SET status = 'running', locked_by = %(owner)s::text,
        lease_until = c.ts + %(ttl)s::float8 * interval '1 second',
        attempt = j.attempt + 1, started_at = c.ts, cancel_requested = false,
        lease_token = %(nonce)s::text || ':' || j.id
    FROM picked p CROSS JOIN clock c
    WHERE j.id = p.id AND p.status = 'pending'
    RETURNING j.*
), recorded AS (
    INSERT INTO {schema}.requests (id, job_ids, created_at)
    SELECT %(request)s::text, array_agg(id), (SELECT ts FROM clock) FROM claimed
    WHERE %(request)s::text IS NOT NULL
    HAVING count(*) > 0
    ON CONFLICT (id) DO NOTHING
), started AS (
    INSERT INTO {schema}.flow_starts (grp, at)
    SELECT s.grp, c.ts
    FROM unnest(%(start_ids)s::bigint[], %(start_groups)s::text[]) AS s(id, grp)
    JOIN claimed k ON k.id = s.id
    CROSS JOIN clock c
), dropped AS (
    DELETE FROM {schema}.flow_starts f
    USING unnest(%(drop_groups)s::text[], %(drop_per)s::float8[]) AS d(grp, per), clock c
    WHERE f.grp = d.grp AND f.at <= c.ts - d.per * interval '1 second'
)
SELECT id, task, queue, payload, status, priority, extract(epoch FROM run_at)::float8,
       attempt, max_attempts, failures, stall_count, max_stalls, interruptions, locked_by,
       extract(epoch FROM lease_until)::float8, extract(epoch FROM created_at)::float8,
       extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8,
       last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors::text, lease_token, replace(uid::text, '-', ''), limit_key,
       snoozes
FROM claimed
ORDER BY priority, run_at, id
