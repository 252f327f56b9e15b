-- Named queries of the PostgreSQL store (loaded by tether.stores.queries).
--
-- Conventions:
-- * Every statement runs with search_path = the configured schema, so names are unqualified.
-- * Times cross the boundary as epoch seconds (float8): in with to_timestamp(), out with
--   extract(epoch FROM x)::float8. "%(now)s IS NULL" means the database's now() decides, so
--   one clock (the database's) rules lease expiry for every machine.
-- * Job rows come back in the field order of tether.stores.base.Job.

-- name: migrate_lock
-- Serialises concurrent migrate() calls for one schema. The xact variant releases itself at
-- commit/rollback, so a crashed migrator never leaves the lock behind.
SELECT pg_advisory_xact_lock(hashtextextended('tether.migrate:' || %(schema)s, 0))

-- name: create_version_table
-- Created before any migration so the version check below has something to read; one row
-- per applied migration file.
CREATE TABLE IF NOT EXISTS schema_version (
    version    integer     PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: has_version_table
-- to_regclass resolves through search_path and yields NULL (no error) when the schema or
-- table is missing, which check_schema turns into a clear SchemaError.
SELECT to_regclass('schema_version') IS NOT NULL

-- name: schema_version
-- 0 for a freshly created, empty version table.
SELECT coalesce(max(version), 0) FROM schema_version

-- name: record_version
-- Written in the same transaction as the migration it records.
INSERT INTO schema_version (version) VALUES (%(version)s)

-- name: push_search_path
-- For a caller's own connection: remember its search_path and point it at our schema for the
-- rest of the transaction only (is_local = true); pop_search_path puts the old one back.
SELECT set_config('tether.saved_search_path', current_setting('search_path'), true),
       set_config('search_path', %(path)s, true)

-- name: pop_search_path
-- Restores what push_search_path saved (still transaction-local).
SELECT set_config('search_path', current_setting('tether.saved_search_path'), true)

-- name: now
-- The database clock every lease is measured against.
SELECT extract(epoch FROM now())::float8

-- name: enqueue_one
-- The single-job fast path (no unique_key): a plain INSERT ... VALUES, without the batch
-- statement's unnest, ordinality and ON CONFLICT machinery, which cost as much again as the
-- insert itself for one row. The NOTIFY stays: it is what gives idle workers millisecond
-- pick-up; it is skipped for a job that is not due yet (nobody can claim it on waking).
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), now()) AS ts
), inserted AS (
    INSERT INTO jobs (task, payload, queue, priority, run_at, max_attempts, max_stalls,
                      created_at)
    SELECT %(task)s, %(payload)s, %(queue)s, %(priority)s,
           coalesce(to_timestamp(%(run_at)s::float8),
                    c.ts + %(delay)s::float8 * interval '1 second'),
           %(max_attempts)s, %(max_stalls)s, c.ts
    FROM clock c
    RETURNING id, queue, run_at <= created_at AS due
)
SELECT id, CASE WHEN due THEN pg_notify(%(channel)s, queue) END FROM inserted

-- name: enqueue
-- One round trip for the whole batch: parallel arrays unnested WITH ORDINALITY. Ids are drawn
-- with nextval() up front (the identity is "by default"), so rows without a unique_key get
-- their id back in input order without relying on RETURNING order. The caller has already
-- folded repeated unique_keys of the batch onto their first occurrence, so every key appears
-- at most once here and ON CONFLICT ... DO UPDATE (a no-op write) may return the id of the
-- live job that holds the key, even one committed concurrently (DO NOTHING would return
-- nothing for it). pg_notify is transactional: waiters wake when the rows are visible.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), now()) AS ts
), input AS (
    SELECT nextval('jobs_id_seq') AS id, i.*
    FROM unnest(%(tasks)s::text[], %(payloads)s::text[], %(queues)s::text[],
                %(priorities)s::int[], %(run_ats)s::float8[], %(delays)s::float8[],
                %(max_attempts)s::int[], %(max_stalls)s::int[], %(unique_keys)s::text[])
         WITH ORDINALITY AS i(task, payload, queue, priority, run_at, delay, max_attempts,
                              max_stalls, unique_key, ord)
), inserted AS (
    INSERT INTO jobs (id, task, payload, queue, priority, run_at, max_attempts, max_stalls,
                      unique_key, created_at)
    SELECT i.id, i.task, i.payload, i.queue, i.priority,
           coalesce(to_timestamp(i.run_at), c.ts + i.delay * interval '1 second'),
           i.max_attempts, i.max_stalls, i.unique_key, c.ts
    FROM input i CROSS JOIN clock c
    ORDER BY i.ord
    ON CONFLICT (unique_key) WHERE status IN ('pending', 'running') AND unique_key IS NOT NULL
    DO UPDATE SET unique_key = EXCLUDED.unique_key
    RETURNING id, unique_key
), notified AS (
    SELECT count(pg_notify(%(channel)s, q.queue)) AS n
    FROM (SELECT DISTINCT queue FROM input) q
)
SELECT coalesce(ins.id, i.id)
FROM input i
LEFT JOIN inserted ins ON ins.unique_key = i.unique_key
CROSS JOIN notified
ORDER BY i.ord

-- name: claim
-- The claim IS the lease grant (contract invariant 1): pick and update in one statement.
-- Single-queue form: "queue = $1" lets the partial claim index deliver rows already in
-- (priority, run_at, id) order, so LIMIT stops after `limit` index entries however long the
-- backlog. SKIP LOCKED lets concurrent claimers pass each other instead of queueing up.
-- FOR UPDATE re-checks the WHERE clause against the newest row version before locking, and
-- the lock is held until the UPDATE is done, so every picked row is still pending when it is
-- written and no (job, attempt) is granted twice. (Repeating "status = 'pending'" in the
-- UPDATE would only tempt the planner to scan the whole pending index for the join.)
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), now()) AS ts
), picked AS (
    SELECT id FROM jobs
    WHERE status = 'pending' AND queue = %(queue)s
      AND run_at <= coalesce(to_timestamp(%(now)s::float8), now())
    ORDER BY priority, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE jobs j
    SET status = 'running', locked_by = %(owner)s,
        lease_until = c.ts + %(ttl)s::float8 * interval '1 second',
        attempt = j.attempt + 1, started_at = c.ts, cancel_requested = false
    FROM picked p CROSS JOIN clock c
    WHERE j.id = p.id
    RETURNING j.*
)
SELECT id, task, queue, payload, status, priority, extract(epoch FROM run_at)::float8,
       attempt, max_attempts, failures, stall_count, max_stalls, interruptions, locked_by,
       extract(epoch FROM lease_until)::float8, extract(epoch FROM created_at)::float8,
       extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8,
       last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors::text
FROM claimed
ORDER BY priority, run_at, id

-- name: claim_queues
-- Same as claim for several queues: "queue = ANY($1)" still scans only the partial claim
-- index (one range per queue), then sorts the due rows of those queues before the LIMIT.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), now()) AS ts
), picked AS (
    SELECT id FROM jobs
    WHERE status = 'pending' AND queue = ANY(%(queues)s::text[])
      AND run_at <= coalesce(to_timestamp(%(now)s::float8), now())
    ORDER BY priority, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE jobs j
    SET status = 'running', locked_by = %(owner)s,
        lease_until = c.ts + %(ttl)s::float8 * interval '1 second',
        attempt = j.attempt + 1, started_at = c.ts, cancel_requested = false
    FROM picked p CROSS JOIN clock c
    WHERE j.id = p.id
    RETURNING j.*
)
SELECT id, task, queue, payload, status, priority, extract(epoch FROM run_at)::float8,
       attempt, max_attempts, failures, stall_count, max_stalls, interruptions, locked_by,
       extract(epoch FROM lease_until)::float8, extract(epoch FROM created_at)::float8,
       extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8,
       last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors::text
FROM claimed
ORDER BY priority, run_at, id

-- name: heartbeat
-- Every lease of a worker renewed in one statement: the leases arrive as parallel arrays and
-- each row is fenced by (id, attempt, owner, status = 'running'). RETURNING tells which
-- matched (the rest are lost) and whether a cancel was requested. The worker-row touch is a
-- second data-modifying CTE: PostgreSQL runs it to completion although nothing reads it.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), now()) AS ts
), lease AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(owners)s::text[])
        AS l(id, attempt, owner)
), touched AS (
    UPDATE workers w SET last_seen = c.ts
    FROM clock c
    WHERE w.id = %(worker)s
)
UPDATE jobs j
SET lease_until = c.ts + %(ttl)s::float8 * interval '1 second'
FROM lease l CROSS JOIN clock c
-- "j.id = ANY(ids)" and coalesce(): probe by primary key only, never scan the fleet's running
-- set (see finish).
WHERE j.id = ANY(%(ids)s::bigint[])
  AND j.id = l.id AND j.attempt = l.attempt AND j.locked_by = l.owner
  AND coalesce(j.status, '') = 'running'
RETURNING j.id, j.attempt, j.locked_by, j.cancel_requested

-- name: finish
-- Outcomes of many attempts in one statement, each fenced by its lease. The counting rules of
-- tether.stores.base are spelled out in the CASEs (a released or stalled job keeps its run_at:
-- it is due at once and keeps its place in line); every SET expression reads the row as it
-- was before this update, so the retry tests "failures + 1 + stall_count < max_attempts" and
-- (stalled: the reap rule) "stall_count + 1 < max_stalls AND failures + stall_count + 1 <
-- max_attempts" are repeated where the new status matters. Leases missing from RETURNING were rejected.
-- o.reason arrives already defaulted ('error' for error/dead outcomes). The batch is one JSON
-- parameter unpacked by json_to_recordset: encoding it is one C call in the worker, where eight
-- parallel arrays cost a sixth of a draining worker's CPU in psycopg's array dumper (profiled).
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), now()) AS ts
), o AS (
    SELECT * FROM json_to_recordset(%(batch)s::json)
        AS o(id bigint, attempt int, owner text, kind text, result text, error text,
             reason text, retry_delay float8)
)
UPDATE jobs j
SET status = CASE
        WHEN o.kind IN ('done', 'cancelled') THEN o.kind
        WHEN o.kind = 'released' THEN 'pending'
        WHEN o.kind = 'error' AND j.failures + 1 + j.stall_count < j.max_attempts
            THEN 'pending'
        WHEN o.kind = 'stalled' AND j.stall_count + 1 < j.max_stalls
         AND j.failures + j.stall_count + 1 < j.max_attempts
            THEN 'pending'
        ELSE 'failed'
    END,
    failures = j.failures + CASE WHEN o.kind IN ('error', 'dead') THEN 1 ELSE 0 END,
    interruptions = j.interruptions + CASE WHEN o.kind = 'released' THEN 1 ELSE 0 END,
    stall_count = j.stall_count + CASE WHEN o.kind = 'stalled' THEN 1 ELSE 0 END,
    run_at = CASE
        WHEN o.kind = 'error' AND j.failures + 1 + j.stall_count < j.max_attempts
            THEN c.ts + o.retry_delay * interval '1 second'
        ELSE j.run_at
    END,
    failure_reason = CASE
        WHEN o.kind = 'dead'
          OR (o.kind = 'error' AND j.failures + 1 + j.stall_count >= j.max_attempts)
          OR (o.kind = 'stalled' AND (j.stall_count + 1 >= j.max_stalls
                                      OR j.failures + j.stall_count + 1 >= j.max_attempts))
            THEN o.reason
        ELSE j.failure_reason
    END,
    finished_at = CASE
        WHEN o.kind IN ('done', 'cancelled', 'dead')
          OR (o.kind = 'error' AND j.failures + 1 + j.stall_count >= j.max_attempts)
          OR (o.kind = 'stalled' AND (j.stall_count + 1 >= j.max_stalls
                                      OR j.failures + j.stall_count + 1 >= j.max_attempts))
            THEN c.ts
        ELSE j.finished_at
    END,
    result = CASE WHEN o.kind = 'done' THEN o.result ELSE j.result END,
    last_error = coalesce(o.error, j.last_error),
    errors = CASE
        WHEN o.error IS NULL THEN j.errors
        ELSE j.errors || jsonb_build_array(jsonb_build_object(
            'attempt', j.attempt, 'error', o.error, 'reason', o.reason,
            'at', extract(epoch FROM c.ts)::float8))
    END,
    locked_by = NULL,
    lease_until = NULL
FROM o CROSS JOIN clock c
-- "j.id = ANY(ids)" hands the planner the batch's primary keys with their count, so it probes
-- O(batch) rows by primary key. Without it, json_to_recordset's default estimate (100 rows)
-- led it to scan the fleet's whole running set (or the table) and hash-join. The status test
-- is wrapped in coalesce() so it cannot match the partial reap index's predicate, which the
-- planner would otherwise AND in as a bitmap of every running job.
WHERE j.id = ANY(%(ids)s::text::bigint[])
  AND j.id = o.id AND j.attempt = o.attempt AND j.locked_by = o.owner
  AND coalesce(j.status, '') = 'running'
RETURNING o.id, o.attempt, o.owner

-- name: save_checkpoint
-- Fenced single-row write; no row back means the lease is stale.
UPDATE jobs SET checkpoint = %(value)s
WHERE id = %(id)s AND attempt = %(attempt)s AND locked_by = %(owner)s AND status = 'running'
RETURNING id

-- name: set_progress
-- Fenced like save_checkpoint.
UPDATE jobs SET progress = %(value)s
WHERE id = %(id)s AND attempt = %(attempt)s AND locked_by = %(owner)s AND status = 'running'
RETURNING id

-- name: reap_expired
-- Contract invariant 3: one set-based write. The CTE walks the partial reap index in expiry
-- order, bounded by LIMIT, and SKIP LOCKED steps over rows another reaper (or a finishing
-- worker) holds; the row lock re-checks "still running and expired" against the latest row
-- version, so two reapers end in the same state. The CTE also carries the old lease out,
-- because RETURNING only sees the new (cleared) locked_by. The stall rule: pending again while
-- stall_count + 1 < max_stalls and failures + stall_count + 1 < max_attempts, else failed
-- with reason 'stalled'. run_at is kept: the job was due when claimed, so it is due again at
-- once and keeps its place in line ahead of newer backlog. The queues that got a job back
-- are notified in the same statement, so idle workers claim it within milliseconds instead of
-- at their next poll (pg_notify is transactional: they wake when the rows are visible).
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), now()) AS ts
), due AS (
    SELECT id, attempt, locked_by FROM jobs
    WHERE status = 'running'
      AND lease_until < coalesce(to_timestamp(%(now)s::float8), now())
                        - %(grace)s::float8 * interval '1 second'
    ORDER BY lease_until
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), moved AS (
UPDATE jobs j
SET stall_count = j.stall_count + 1,
    status = CASE
        WHEN j.stall_count + 1 < j.max_stalls
         AND j.failures + j.stall_count + 1 < j.max_attempts THEN 'pending'
        ELSE 'failed'
    END,
    failure_reason = CASE
        WHEN j.stall_count + 1 < j.max_stalls
         AND j.failures + j.stall_count + 1 < j.max_attempts THEN j.failure_reason
        ELSE 'stalled'
    END,
    finished_at = CASE
        WHEN j.stall_count + 1 < j.max_stalls
         AND j.failures + j.stall_count + 1 < j.max_attempts THEN j.finished_at
        ELSE c.ts
    END,
    last_error = %(error)s,
    errors = j.errors || jsonb_build_array(jsonb_build_object(
        'attempt', j.attempt, 'error', %(error)s::text, 'reason', 'stalled',
        'at', extract(epoch FROM c.ts)::float8)),
    locked_by = NULL,
    lease_until = NULL
FROM due d CROSS JOIN clock c
-- By primary key only. The CTE holds FOR UPDATE locks on exactly these rows, so nobody can
-- have changed them since it re-checked them; repeating "status = 'running'" here let the
-- planner (with statistics taken while few jobs ran) probe the partial reap index per row and
-- go quadratic: 9,000 expired leases took 7.5 s instead of milliseconds.
WHERE j.id = d.id
RETURNING j.id, j.attempt, d.locked_by, j.status, j.stall_count, j.queue
), woke AS (
    SELECT count(pg_notify(%(channel)s, q.queue)) AS n
    FROM (SELECT DISTINCT queue FROM moved WHERE status = 'pending') q
)
SELECT m.id, m.attempt, m.locked_by, m.status, m.stall_count FROM moved m CROSS JOIN woke

-- name: next_lease_expiry
-- min() over the partial reap index: one index probe.
SELECT extract(epoch FROM min(lease_until))::float8 FROM jobs WHERE status = 'running'

-- name: notify
-- One notification per queue; the channel is per schema so tenants never wake each other.
SELECT count(pg_notify(%(channel)s, q)) FROM unnest(%(queues)s::text[]) AS q

-- name: cancel
-- pending -> cancelled at once; running -> cancel_requested (its holder learns at the next
-- heartbeat). RETURNING reads the new status, which tells the two apart. When no live row
-- matched, the second branch tells "finished" (exists, terminal) from "not found" (no row).
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), now()) AS ts
), changed AS (
    UPDATE jobs j
    SET status = CASE WHEN j.status = 'pending' THEN 'cancelled' ELSE j.status END,
        cancel_requested = j.cancel_requested OR j.status = 'running',
        finished_at = CASE WHEN j.status = 'pending' THEN c.ts ELSE j.finished_at END
    FROM clock c
    WHERE j.id = %(id)s AND j.status IN ('pending', 'running')
    RETURNING CASE WHEN j.status = 'cancelled' THEN 'cancelled' ELSE 'requested' END AS result
)
SELECT result FROM changed
UNION ALL
SELECT 'finished' FROM jobs WHERE id = %(id)s AND NOT EXISTS (SELECT 1 FROM changed)

-- name: retry_failed_ids
-- Dead-letter retry of chosen jobs: counters reset, attempt kept (it is the fence). The
-- queues that got work are notified in the same statement.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), now()) AS ts
), moved AS (
    UPDATE jobs j
    SET status = 'pending', run_at = c.ts, failures = 0, stall_count = 0,
        failure_reason = NULL, finished_at = NULL, cancel_requested = false
    FROM clock c
    WHERE j.id = ANY(%(ids)s::bigint[]) AND j.status = 'failed'
    RETURNING j.queue
)
SELECT (SELECT count(*) FROM moved),
       (SELECT count(pg_notify(%(channel)s, q.queue)) FROM (SELECT DISTINCT queue FROM moved) q)

-- name: retry_failed_all
-- Same as retry_failed_ids for every failed job (the prune index covers status = 'failed').
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), now()) AS ts
), moved AS (
    UPDATE jobs j
    SET status = 'pending', run_at = c.ts, failures = 0, stall_count = 0,
        failure_reason = NULL, finished_at = NULL, cancel_requested = false
    FROM clock c
    WHERE j.status = 'failed'
    RETURNING j.queue
)
SELECT (SELECT count(*) FROM moved),
       (SELECT count(pg_notify(%(channel)s, q.queue)) FROM (SELECT DISTINCT queue FROM moved) q)
