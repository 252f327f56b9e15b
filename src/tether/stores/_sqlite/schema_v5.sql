-- Schema of the SQLite store, version 5 (issue 18 G): upgrade steps applied on top of version
-- 4, in file order, in the same transaction as the version row that records them.

-- name: add_schedules_spec
-- The spec (and zone) a schedule's latest tick was recorded under (Schedule.fingerprint). It
-- was read from the schedule's last job, so once the pruner removed that job a deploy that
-- changed the spec looked unchanged and caught up from scratch (a weekly schedule made hourly
-- with catch_up="all" enqueued 72 jobs at once); this row is never pruned. NULL on rows
-- written before the upgrade (the scheduler then reads the last job, as before).
ALTER TABLE schedules ADD COLUMN spec TEXT
