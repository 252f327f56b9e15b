-- Named queries of a PostgreSQL claim with flow limits (issue #19). A claim without flow never
-- runs any of them: it is the plain claim statement of queries.sql, unchanged. Conventions as
-- in queries.sql.

-- name: flow_claim
-- The whole limited claim in one statement and one round trip: the server function of
-- migration 0007 (redefined by 0009: its usual case is one statement) takes the advisory
-- lock, answers a replay, counts, chooses and grants (its statements say why each is shaped
-- so). Run in autocommit, this statement is its own transaction, so the lock is released by
-- its commit (nothing outlives it: fine behind PgBouncer's transaction pooling). The function
-- returns whole job rows; they are spelled here like every claim's (queries.sql, claim: the
-- status, owner and token the claim decided are left out and filled in by lease.py, the times
-- read with date_part), in claim order.
SELECT id, task, queue, payload, priority, date_part('epoch', run_at), attempt, max_attempts,
       failures, stall_count, max_stalls, interruptions, date_part('epoch', lease_until),
       date_part('epoch', created_at), date_part('epoch', started_at),
       date_part('epoch', finished_at), last_error, failure_reason, result, checkpoint,
       progress, unique_key, cancel_requested, errors::text, replace(uid::text, '-', ''),
       limit_key, snoozes
FROM {schema}.flow_claim(
    %(key)s::bigint, %(now)s::float8, %(queues)s::text[], %(limit)s::integer,
    %(owner)s::text, %(ttl)s::float8, %(nonce)s::text, %(request)s::text,
    %(scope)s::text[], %(name)s::text[], %(conc)s::integer[], %(rate)s::integer[],
    %(per)s::float8[], %(per_key)s::boolean[], %(pre)s::text[])
ORDER BY priority, run_at, id
