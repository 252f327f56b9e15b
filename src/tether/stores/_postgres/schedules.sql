-- Named queries of the PostgreSQL store's periodic schedules (issue #12). schedules.py runs
-- schedule_claim, then (for a job) producers.sql's enqueue and schedule_set_job, in ONE
-- transaction on one pool connection: the tick and its job commit together or not at all.
-- Conventions as in queries.sql ({schema}, epoch seconds at the boundary).

-- name: schedule_claim
-- Take the tick iff no tick >= it is recorded. A concurrent caller with the same tick waits on
-- this row's lock (or on the speculative insert of a new row) until the first transaction
-- ends; READ COMMITTED then re-evaluates the DO UPDATE's WHERE against the committed row,
-- finds last_tick >= tick and returns no row: it writes nothing and enqueues nothing. A
-- replay (its reply was lost) and a paused leader waking late with an old tick do the same.
-- spec (the schedule's fingerprint) is recorded with the tick it was taken under; NULL keeps
-- the recorded one. The row is never pruned, so a later leader can always tell a deploy
-- changed the schedule (the last job, where it was read before, may be pruned).
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
)
INSERT INTO {schema}.schedules AS s (name, last_tick, last_job_id, updated_at, spec)
SELECT %(name)s::text, %(tick)s::float8, NULL, c.ts, %(spec)s::text FROM clock c
ON CONFLICT (name) DO UPDATE SET last_tick = excluded.last_tick, updated_at = excluded.updated_at,
                                 spec = coalesce(excluded.spec, s.spec)
WHERE s.last_tick < excluded.last_tick
RETURNING s.name

-- name: schedule_set_job
-- The job enqueued for the tick just taken, in the same transaction (the row is locked by it
-- already). A skipped tick keeps the last enqueued tick's job.
UPDATE {schema}.schedules SET last_job_id = %(job_id)s WHERE name = %(name)s

-- name: schedules_list
-- Every schedule for `tether schedules`: a handful of rows, read by primary-key order.
SELECT name, last_tick, last_job_id, extract(epoch FROM updated_at)::float8, spec
FROM {schema}.schedules ORDER BY name
