-- Named queries of the PostgreSQL store, part one: the lease protocol (claim, heartbeat,
-- finish, fenced writes, reap). Producers are in producers.sql, maintenance and inspection in
-- admin.sql. Loaded by tether.stores._queries.
--
-- Conventions:
-- * {schema} is the store's schema, formatted in once when the store opens (psycopg.sql, so
--   it is quoted as an identifier). Every tether table is named with it: connections keep the
--   user's own search_path, and a transaction shared with the user (conn=, transaction())
--   sees the user's tables, never ours by accident.
-- * Times cross the boundary as epoch seconds (float8): in with to_timestamp(), out with
--   extract(epoch FROM x)::float8. "%(now)s IS NULL" means the database clock decides, so one
--   clock rules lease expiry for every machine. That clock is statement_timestamp(): in our
--   own autocommit statements it equals now(), and inside a caller's long transaction it is
--   still the moment of the statement, not of the transaction's BEGIN.
-- * Job rows come back in the field order of tether.stores.JobRecord (uid as 32 hex digits).
-- * Every fenced write matches (id, attempt, locked_by, lease_token) and status = 'running'.

-- name: now
-- The database clock every lease is measured against.
SELECT extract(epoch FROM statement_timestamp())::float8

-- name: claim
-- The claim IS the lease grant (contract invariant 1): pick and update in one statement.
-- Single-queue form: "queue = $1" lets the partial claim index deliver rows already in
-- (priority, run_at, id) order, so LIMIT stops after `limit` index entries however long the
-- backlog. SKIP LOCKED lets concurrent claimers pass each other instead of queueing up.
-- FOR UPDATE re-checks the WHERE clause against the newest row version before locking, and
-- the lock is held until the UPDATE is done, so every picked row is still pending when it is
-- written and no (job, attempt) is granted twice. (Repeating "status = 'pending'" in the
-- UPDATE would only tempt the planner to scan the whole pending index for the join.)
-- Each claimed row gets lease_token = nonce:id; the nonce is the caller's request id. "prior"
-- makes a replay safe: when jobs still run under this nonce and owner (the first call's reply
-- was lost), they are returned and nothing more is claimed. It is one probe of the small
-- partial nonce index, in the same round trip. "seen" and "recorded": a claim with a request
-- id that granted jobs is recorded in requests (id 'claim:<request id>', the same statement),
-- so a replay claims nothing more even once its jobs were reaped or finished and "prior" is
-- empty (as on every other store); one primary-key probe, and one row per granted claim,
-- pruned after a day with the enqueue records. A concurrent twin of the same request (never
-- sent by a worker, which retries only after the first call ended) records nothing more.
-- The row comes back without what the claim itself decides for every row it returns (a
-- claimed row was just set so, a replayed one is matched on it): status ('running'),
-- locked_by (the owner) and lease_token (nonce:id); lease.py fills those in, so the worker's
-- JobRecord is whole and exact without 100 copies of them on the wire (issue 23). The
-- claimed rows are returned by the UPDATE itself, in the order below, not as whole rows
-- (RETURNING j.* copied every column, payload included, into the CTE's store and out
-- again: measured a tenth of the claim's server time with the numeric extract below).
-- Times: date_part('epoch', ...) is float8 arithmetic on the stored microseconds, the same
-- correctly rounded value as extract(epoch ...)::float8, which goes through numeric
-- (PostgreSQL 14+) at several times the cost, five times per row.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
), prior AS (
    SELECT id, task, queue, payload, priority, date_part('epoch', run_at) AS run_at, attempt,
           max_attempts, failures, stall_count, max_stalls, interruptions,
           date_part('epoch', lease_until) AS lease_until,
           date_part('epoch', created_at) AS created_at,
           date_part('epoch', started_at) AS started_at,
           date_part('epoch', finished_at) AS finished_at, last_error, failure_reason, result,
           checkpoint, progress, unique_key, cancel_requested, errors::text AS errors,
           replace(uid::text, '-', '') AS uid, limit_key, snoozes
    FROM {schema}.jobs
    WHERE left(lease_token, -strpos(reverse(lease_token), ':')) = %(nonce)s::text
      AND status = 'running' AND locked_by = %(owner)s::text
), seen AS (
    SELECT 1 FROM {schema}.requests WHERE id = %(request)s::text
), picked AS (
    SELECT id FROM {schema}.jobs
    WHERE status = 'pending' AND queue = %(queue)s
      AND run_at <= coalesce(to_timestamp(%(now)s::float8), statement_timestamp())
      AND NOT EXISTS (SELECT 1 FROM prior) AND NOT EXISTS (SELECT 1 FROM seen)
    ORDER BY priority, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE {schema}.jobs j
    SET status = 'running', locked_by = %(owner)s::text,
        lease_until = c.ts + %(ttl)s::float8 * interval '1 second',
        attempt = j.attempt + 1, started_at = c.ts, cancel_requested = false,
        lease_token = %(nonce)s::text || ':' || j.id
    FROM picked p CROSS JOIN clock c
    WHERE j.id = p.id
    RETURNING j.id, j.task, j.queue, j.payload, j.priority,
        date_part('epoch', j.run_at) AS run_at, j.attempt, j.max_attempts, j.failures,
        j.stall_count, j.max_stalls, j.interruptions,
        date_part('epoch', j.lease_until) AS lease_until,
        date_part('epoch', j.created_at) AS created_at,
        date_part('epoch', j.started_at) AS started_at,
        date_part('epoch', j.finished_at) AS finished_at, j.last_error, j.failure_reason,
        j.result, j.checkpoint, j.progress, j.unique_key, j.cancel_requested,
        j.errors::text AS errors, replace(j.uid::text, '-', '') AS uid, j.limit_key, j.snoozes
), recorded AS (
    INSERT INTO {schema}.requests (id, job_ids, created_at)
    SELECT %(request)s::text, array_agg(id), (SELECT ts FROM clock) FROM claimed
    WHERE %(request)s::text IS NOT NULL
    HAVING count(*) > 0
    ON CONFLICT (id) DO NOTHING
), got AS (
    SELECT * FROM claimed UNION ALL SELECT * FROM prior
)
SELECT * FROM got
ORDER BY priority, run_at, id

-- name: claim_queues
-- Same as claim for several queues: "queue = ANY($1)" still scans only the partial claim
-- index (one range per queue), then sorts the due rows of those queues before the LIMIT.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
), prior AS (
    SELECT id, task, queue, payload, priority, date_part('epoch', run_at) AS run_at, attempt,
           max_attempts, failures, stall_count, max_stalls, interruptions,
           date_part('epoch', lease_until) AS lease_until,
           date_part('epoch', created_at) AS created_at,
           date_part('epoch', started_at) AS started_at,
           date_part('epoch', finished_at) AS finished_at, last_error, failure_reason, result,
           checkpoint, progress, unique_key, cancel_requested, errors::text AS errors,
           replace(uid::text, '-', '') AS uid, limit_key, snoozes
    FROM {schema}.jobs
    WHERE left(lease_token, -strpos(reverse(lease_token), ':')) = %(nonce)s::text
      AND status = 'running' AND locked_by = %(owner)s::text
), seen AS (
    SELECT 1 FROM {schema}.requests WHERE id = %(request)s::text
), picked AS (
    SELECT id FROM {schema}.jobs
    WHERE status = 'pending' AND queue = ANY(%(queues)s::text[])
      AND run_at <= coalesce(to_timestamp(%(now)s::float8), statement_timestamp())
      AND NOT EXISTS (SELECT 1 FROM prior) AND NOT EXISTS (SELECT 1 FROM seen)
    ORDER BY priority, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE {schema}.jobs j
    SET status = 'running', locked_by = %(owner)s::text,
        lease_until = c.ts + %(ttl)s::float8 * interval '1 second',
        attempt = j.attempt + 1, started_at = c.ts, cancel_requested = false,
        lease_token = %(nonce)s::text || ':' || j.id
    FROM picked p CROSS JOIN clock c
    WHERE j.id = p.id
    RETURNING j.id, j.task, j.queue, j.payload, j.priority,
        date_part('epoch', j.run_at) AS run_at, j.attempt, j.max_attempts, j.failures,
        j.stall_count, j.max_stalls, j.interruptions,
        date_part('epoch', j.lease_until) AS lease_until,
        date_part('epoch', j.created_at) AS created_at,
        date_part('epoch', j.started_at) AS started_at,
        date_part('epoch', j.finished_at) AS finished_at, j.last_error, j.failure_reason,
        j.result, j.checkpoint, j.progress, j.unique_key, j.cancel_requested,
        j.errors::text AS errors, replace(j.uid::text, '-', '') AS uid, j.limit_key, j.snoozes
), recorded AS (
    INSERT INTO {schema}.requests (id, job_ids, created_at)
    SELECT %(request)s::text, array_agg(id), (SELECT ts FROM clock) FROM claimed
    WHERE %(request)s::text IS NOT NULL
    HAVING count(*) > 0
    ON CONFLICT (id) DO NOTHING
), got AS (
    SELECT * FROM claimed UNION ALL SELECT * FROM prior
)
SELECT * FROM got
ORDER BY priority, run_at, id

-- name: heartbeat
-- Every lease of a worker renewed in one statement: the leases arrive as parallel arrays and
-- each row is fenced by its whole lease and status = 'running'. RETURNING tells which matched
-- (the rest are lost) and whether a cancel was requested. The worker-row touch is a second
-- data-modifying CTE: PostgreSQL runs it to completion although nothing reads it. A heartbeat
-- never waits on a producer: enqueue takes no lock on an existing job row.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
), lease AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(owners)s::text[],
                         %(tokens)s::text[])
        AS l(id, attempt, owner, token)
), touched AS (
    UPDATE {schema}.workers w SET last_seen = c.ts
    FROM clock c
    WHERE w.id = %(worker)s
)
UPDATE {schema}.jobs j
SET lease_until = c.ts + %(ttl)s::float8 * interval '1 second'
FROM lease l CROSS JOIN clock c
-- "j.id = ANY(ids)" and coalesce(): probe by primary key only, never scan the fleet's running
-- set (see finish).
WHERE j.id = ANY(%(ids)s::bigint[])
  AND j.id = l.id AND j.attempt = l.attempt AND j.locked_by = l.owner
  AND j.lease_token = l.token
  AND coalesce(j.status, '') = 'running'
RETURNING j.id, j.attempt, j.locked_by, j.lease_token, j.cancel_requested

-- name: finish
-- Outcomes of many attempts in one statement, each fenced by its own lease: the batch holds
-- distinct leases only (the caller folds exact repeats), and at most one lease can match a
-- row, so a stale outcome next to the valid one for the same job never hides it. The counting
-- rules of tether.stores._contract are spelled out in the CASEs; every SET expression reads the row
-- as it was before this update (and, under a concurrent write, as it is after it: the
-- re-check sees cancel_requested set a moment ago). "Stays pending" is
--   (released OR (error AND failures + 1 + stall_count < max_attempts)
--    OR (stalled AND stall_count + 1 < max_stalls
--        AND failures + stall_count + 1 < max_attempts: the reap rule)) AND NOT cancel_requested
-- and is repeated where it matters. A requested cancel sticks: an error, stall or hand-back of
-- such a job ends it cancelled. A released job keeps its run_at unless a retry_delay is given;
-- a stalled one always keeps it (stall_count + 1, failures unchanged).
-- snoozed (the handler asked to run later): pending at now + retry_delay, snoozes + 1, nothing
-- else counted; always recorded in errors (reason 'snoozed', the text or 'snoozed') but never
-- in last_error, which keeps the job's last real error. A requested cancel sticks here too.
-- o.reason arrives defaulted per kind (error/dead: 'error', stalled: 'stalled', ...). The
-- batch is one JSON parameter unpacked by json_to_recordset: encoding it is one C call in the
-- worker, where parallel arrays cost a sixth of a draining worker's CPU (profiled).
-- The lease_token is kept and the applied outcome's digest stored, so that finish_replays
-- can recognise a replay of exactly that outcome (see there).
-- Completion notification (wait_for_finish): ONE pg_notify per statement on the store's
-- "<schema>_done" channel, its payload the comma-separated ids that became terminal, or '*'
-- ("any": every waiter re-reads) when the list would pass NOTIFY's 8000-byte payload limit.
-- A batch where nothing ended (retries, hand-backs) sends nothing. pg_notify is
-- transactional: a waiter woken by it reads the terminal row.
-- NOTIFY costs every finish about a tenth of its time (queue write and signals at commit), so
-- it is sent only when someone may be waiting: a process with finish waiters holds the shared
-- advisory lock %(done_key)s on its listening connection (listen.py). A finish that gets the
-- key exclusively (try: never waits) knows nobody listens and holds it to its commit, so a
-- waiter taking the shared lock later reads the row only after this commit; a finish that
-- does not get it (a waiter, or only another finish holds it) notifies. %(gate)s is false
-- inside a caller's transaction (conn=): the key must not be held for the caller's lifetime.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
), o AS (
    SELECT * FROM json_to_recordset(%(batch)s::json)
        AS o(id bigint, attempt int, owner text, token text, kind text, result text,
             error text, reason text, retry_delay float8, digest text)
), moved AS (
UPDATE {schema}.jobs j
SET status = CASE
        WHEN (o.kind IN ('released', 'snoozed')
              OR (o.kind = 'error' AND j.failures + 1 + j.stall_count < j.max_attempts)
              OR (o.kind = 'stalled' AND j.stall_count + 1 < j.max_stalls
                  AND j.failures + j.stall_count + 1 < j.max_attempts))
             AND NOT j.cancel_requested THEN 'pending'
        WHEN o.kind IN ('done', 'cancelled') THEN o.kind
        WHEN o.kind IN ('error', 'released', 'stalled', 'snoozed') AND j.cancel_requested
            THEN 'cancelled'
        ELSE 'failed'
    END,
    failures = j.failures + CASE WHEN o.kind IN ('error', 'dead') THEN 1 ELSE 0 END,
    interruptions = j.interruptions + CASE WHEN o.kind = 'released' THEN 1 ELSE 0 END,
    stall_count = j.stall_count + CASE WHEN o.kind = 'stalled' THEN 1 ELSE 0 END,
    snoozes = j.snoozes + CASE WHEN o.kind = 'snoozed' THEN 1 ELSE 0 END,
    run_at = CASE
        WHEN (o.kind IN ('released', 'snoozed')
              OR (o.kind = 'error' AND j.failures + 1 + j.stall_count < j.max_attempts))
             AND NOT j.cancel_requested
             AND (o.kind IN ('error', 'snoozed') OR o.retry_delay > 0)
            THEN c.ts + o.retry_delay * interval '1 second'
        ELSE j.run_at
    END,
    failure_reason = CASE
        WHEN o.kind = 'dead'
          OR (o.kind = 'error' AND NOT j.cancel_requested
              AND j.failures + 1 + j.stall_count >= j.max_attempts)
          OR (o.kind = 'stalled' AND NOT j.cancel_requested
              AND (j.stall_count + 1 >= j.max_stalls
                   OR j.failures + j.stall_count + 1 >= j.max_attempts))
            THEN o.reason
        ELSE j.failure_reason
    END,
    finished_at = CASE
        WHEN (o.kind IN ('released', 'snoozed')
              OR (o.kind = 'error' AND j.failures + 1 + j.stall_count < j.max_attempts)
              OR (o.kind = 'stalled' AND j.stall_count + 1 < j.max_stalls
                  AND j.failures + j.stall_count + 1 < j.max_attempts))
             AND NOT j.cancel_requested THEN j.finished_at
        ELSE c.ts
    END,
    result = CASE WHEN o.kind = 'done' THEN o.result ELSE j.result END,
    last_error = CASE WHEN o.kind = 'snoozed' THEN j.last_error
                      ELSE coalesce(o.error, j.last_error) END,
    errors = CASE
        WHEN o.error IS NULL AND o.kind <> 'snoozed' THEN j.errors
        ELSE j.errors || jsonb_build_array(jsonb_build_object(
            'attempt', j.attempt, 'error', coalesce(o.error, 'snoozed'), 'reason', o.reason,
            'at', extract(epoch FROM c.ts)::float8, 'owner', o.owner))
    END,
    locked_by = NULL,
    lease_until = NULL,
    outcome_digest = o.digest
FROM o CROSS JOIN clock c
-- "j.id = ANY(ids)" hands the planner the batch's primary keys with their count, so it probes
-- O(batch) rows by primary key. Without it, json_to_recordset's default estimate (100 rows)
-- led it to scan the fleet's whole running set (or the table) and hash-join. The status test
-- is wrapped in coalesce() so it cannot match the partial reap index's predicate, which the
-- planner would otherwise AND in as a bitmap of every running job.
WHERE j.id = ANY(%(ids)s::text::bigint[])
  AND j.id = o.id AND j.attempt = o.attempt AND j.locked_by = o.owner
  AND j.lease_token = o.token
  AND coalesce(j.status, '') = 'running'
RETURNING o.id, o.attempt, o.owner, o.token, j.status, j.has_children
), ended AS (
    -- One pass over the batch for both ends of a job: the NOTIFY (above), and invariant 6:
    -- the jobs that ended here and have children resolve their links in this same statement
    -- (resolve_links, migration 0008, whose fresh snapshot sees a child an enqueue linked
    -- while this statement waited for the parent's row lock; it announces the children it
    -- changes itself). "parents" stays NULL unless some ended job has has_children, and the
    -- function is never called then: a batch without children pays two empty FILTERed
    -- aggregates (measured: the same time as before, within noise). The clock is spelled
    -- out, not read from "clock": a sub-select there is an InitPlan that every execution
    -- sets up, called or not (that alone cost a tenth of this statement's time).
    SELECT CASE WHEN e.ids IS NOT NULL
                 AND NOT (%(gate)s::bool AND pg_try_advisory_xact_lock(%(done_key)s::bigint))
                THEN pg_notify(%(done)s, CASE WHEN length(e.ids) <= 7900 THEN e.ids ELSE '*' END)
           END AS notified,
           CASE WHEN e.parents IS NOT NULL
                THEN {schema}.resolve_links(
                    e.parents, e.ended,
                    coalesce(to_timestamp(%(now)s::float8), statement_timestamp()),
                    %(channel)s, %(done)s)
           END AS resolved
    FROM (SELECT string_agg(m.id::text, ',') AS ids,
                 array_agg(m.id) FILTER (WHERE m.has_children) AS parents,
                 array_agg(m.status) FILTER (WHERE m.has_children) AS ended
          FROM moved m
          WHERE m.status IN ('done', 'failed', 'cancelled')) e
)
SELECT m.id, m.attempt, m.owner, m.token FROM moved m CROSS JOIN ended

-- name: finish_replays
-- Run only for the outcomes finish did not apply (rare: a lost lease, or a replay), so the
-- hot statement stays as lean to plan and run as before. A replay is an outcome this claim
-- already applied whose reply was lost: the row is no longer running, and attempt, token
-- (kept after finish) and the outcome's digest all match. It is reported as accepted and
-- changes nothing; any other outcome stays rejected. Nothing here can race the replayed
-- write: a row that left running is touched only by a new claim or a dead-letter retry, and
-- both change the token. Probes by primary key only. The digest comes back so that a second,
-- different outcome for the same lease in one call is answered on its own, as it would be in
-- a later call (lease.py).
SELECT o.id, o.attempt, o.owner, o.token, o.digest
FROM json_to_recordset(%(batch)s::json)
    AS o(id bigint, attempt int, owner text, token text, digest text)
JOIN {schema}.jobs j ON j.id = o.id
WHERE j.id = ANY(%(ids)s::text::bigint[])
  AND coalesce(j.status, '') <> 'running'
  AND j.attempt = o.attempt AND j.lease_token = o.token AND j.outcome_digest = o.digest

-- name: save_checkpoint
-- Fenced single-row write; no row back means the lease is stale.
UPDATE {schema}.jobs SET checkpoint = %(value)s
WHERE id = %(id)s AND attempt = %(attempt)s AND locked_by = %(owner)s
  AND lease_token = %(token)s AND status = 'running'
RETURNING id

-- name: set_progress
-- Fenced like save_checkpoint.
UPDATE {schema}.jobs SET progress = %(value)s
WHERE id = %(id)s AND attempt = %(attempt)s AND locked_by = %(owner)s
  AND lease_token = %(token)s AND status = 'running'
RETURNING id

-- name: reap_expired
-- Contract invariant 3: one set-based write. The CTE walks the partial reap index in expiry
-- order, bounded by LIMIT, and SKIP LOCKED steps over rows another reaper (or a finishing
-- worker) holds; the row lock re-checks "still running and expired" against the latest row
-- version, so two reapers end in the same state. The CTE also carries the old lease out,
-- because RETURNING only sees the new (cleared) locked_by; it becomes the error record's
-- owner. The stall rule: pending again while stall_count + 1 < max_stalls and failures +
-- stall_count + 1 < max_attempts, else failed with reason 'stalled'; a requested cancel
-- sticks (cancelled). run_at is kept: the job was due when claimed, so it is due again at
-- once and keeps its place in line ahead of newer backlog. The token is cleared: a replayed
-- finish of the reaped attempt must be rejected. The queues that got a job back are notified
-- in the same statement, so idle workers claim it within milliseconds instead of at their
-- next poll (pg_notify is transactional: they wake when the rows are visible). The jobs it
-- ended (dead-lettered or cancelled) are announced to wait_for_finish as in finish: one
-- notification, ids or '*'.
-- The error record: jsonb_build_object costs ~4-5 us a call (a type lookup and a conversion
-- per value), a third of the whole per-row cost (profiled: 10,000 expired leases, 1M finished
-- jobs). A reaped batch holds few distinct (attempt, owner) pairs (the jobs of a few dead
-- workers), so "records" builds each pair's record once, keyed "attempt:owner" in one small
-- jsonb object, and each row looks its own up. With more than 64 distinct pairs the object
-- would be large (a lookup copies it), so "records" gives up (small = false) and each row
-- builds its own record as before: either way linear, never a join whose plan could go
-- quadratic on a bad estimate.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
), due AS (
    SELECT id, attempt, locked_by FROM {schema}.jobs
    WHERE status = 'running'
      AND lease_until < coalesce(to_timestamp(%(now)s::float8), statement_timestamp())
                        - %(grace)s::float8 * interval '1 second'
    ORDER BY lease_until
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
)
SELECT m.id, m.attempt, m.locked_by, m.status, m.stall_count
FROM moved m CROSS JOIN woke CROSS JOIN ended CROSS JOIN linked

-- name: next_lease_expiry
-- The first entry of the partial reap index: one index probe. Spelled as ORDER BY ... LIMIT 1
-- (what min() becomes anyway) so that no other index over the running set (the nonce index)
-- looks as cheap to a planner that sees only a few running rows.
SELECT extract(epoch FROM lease_until)::float8 FROM {schema}.jobs
WHERE status = 'running' ORDER BY lease_until LIMIT 1

-- name: notify
-- One notification per queue; the channel is per schema so tenants never wake each other.
SELECT count(pg_notify(%(channel)s, q)) FROM unnest(%(queues)s::text[]) AS q
