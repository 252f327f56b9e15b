-- Named queries of the PostgreSQL store, part four: noticing a failover, and one that lost
-- data (issue 18, B). Read by watch.py; {schema} is the store's schema. The identity row is
-- made by migration 0004.

-- name: observe
-- One round trip, run at most every few seconds on a worker's claim and heartbeat (and at
-- once after a connection error): what the process compares with what it saw last.
-- * the identity row (LEFT JOIN: a schema cloned without its rows has none yet);
-- * the server's WAL timeline, from the name of the current WAL file (its first 8 hex digits):
--   promotion of a standby starts a new one at once (pg_control_checkpoint() only shows it
--   after the next checkpoint), and pg_walfile_name needs no privilege. NULL on a standby,
--   where the function raises (CASE evaluates it only on a primary);
-- * the job id sequence's last value as this server knows it: below an id this process saw
--   handed out means the server lost those ids and hands them out again (a standby's copy of
--   the sequence is at most 32 ahead, never behind, of what it replayed);
-- * the uid of the newest job this process claimed, by id: another uid (or none) after a
--   failover means that job is gone and its id went, or will go, to another job.
SELECT i.epoch::text, i.timeline, i.failovers, i.data_loss,
       CASE WHEN pg_is_in_recovery() THEN NULL
            ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
       END,
       (SELECT last_value FROM {schema}.jobs_id_seq),
       (SELECT replace(uid::text, '-', '') FROM {schema}.jobs WHERE id = %(id)s::bigint)
FROM (SELECT) AS one LEFT JOIN {schema}.identity AS i ON true

-- name: identity_ensure
-- The identity row of a schema that lacks it (cloned without rows); a no-op otherwise.
INSERT INTO {schema}.identity DEFAULT VALUES ON CONFLICT DO NOTHING

-- name: count_data_loss
-- The first process to notice a loss counts it and draws a new epoch, once: the WHERE clause
-- matches only while the epoch is still the one it knew, so a second process racing it
-- updates nothing and learns of the loss from the changed epoch, like every other process.
UPDATE {schema}.identity
SET epoch = gen_random_uuid(), data_loss = data_loss + 1, last_data_loss_at = now()
WHERE epoch = %(epoch)s::uuid
RETURNING epoch::text

-- name: count_failover
-- The server's timeline moved (a standby was promoted): recorded once by whoever sees it
-- first (the WHERE clause compares with the timeline read in the same process's observe),
-- counted unless the row had none yet (a fresh schema records its first timeline).
UPDATE {schema}.identity
SET timeline = %(timeline)s::bigint,
    failovers = failovers + (timeline IS NOT NULL)::int,
    last_failover_at = CASE WHEN timeline IS NULL THEN last_failover_at ELSE now() END
WHERE timeline IS NOT DISTINCT FROM %(old)s::bigint

-- name: identity_info
-- For `tether stats` and the dashboard: the incidents counted so far (no row: none).
SELECT i.timeline, i.failovers, i.data_loss,
       extract(epoch FROM i.last_failover_at)::float8,
       extract(epoch FROM i.last_data_loss_at)::float8
FROM (SELECT) AS one LEFT JOIN {schema}.identity AS i ON true
