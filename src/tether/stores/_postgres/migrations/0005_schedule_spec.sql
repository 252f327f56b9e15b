-- tether PostgreSQL schema, version 5 (issue 18 G): the spec of a schedule in its own record.
--
-- Applied like 0001: one transaction under pg_advisory_xact_lock, search_path = the schema.

-- The spec (and zone) a schedule's latest tick was recorded under (Schedule.fingerprint). It
-- was read from the schedule's last job, so once the pruner removed that job a deploy that
-- changed the spec looked unchanged and caught up from scratch (a weekly schedule made hourly
-- with catch_up = 'all' enqueued 72 jobs at once); this row is never pruned. NULL on rows
-- written before the upgrade (the scheduler then reads the last job, as before). Adding a
-- nullable column without a default rewrites nothing.
ALTER TABLE schedules ADD COLUMN spec text;
