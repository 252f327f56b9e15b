-- Schema of the SQLite store, version 6 (issue #19, flow limits and snooze): upgrade steps
-- applied on top of version 5, in file order, in the same transaction as the version row that
-- records them.

-- name: add_jobs_limit_key
-- The value a task's fleet-wide limits are partitioned by, stored with the job at enqueue
-- (NewJob.limit_key). NULL: the job has no key ('' is a key). Rows of an older tether have none.
ALTER TABLE jobs ADD COLUMN limit_key TEXT

-- name: add_jobs_snoozes
-- snoozed outcomes (the handler asked to run later): neither failures nor attempts that count.
ALTER TABLE jobs ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0

-- name: create_jobs_flow_index
-- A claim with flow limits finds each (queue, task, limit_key) group of keyed jobs with one
-- seek per group (a loose index scan) and reads only the heads of the groups that have room:
-- a key at its limit with thousands of jobs behind it costs a seek, not a scan of them.
-- Partial on pending keyed rows: jobs without a key (every job of an application that uses
-- no limit_key) are not in it, so enqueueing and claiming them (moving them out of pending)
-- costs what it did before version 6 (a full index here doubled a plain claim's time).
CREATE INDEX IF NOT EXISTS jobs_flow ON jobs (queue, task, limit_key, priority, run_at, id)
    WHERE status = 'pending' AND limit_key IS NOT NULL

-- name: create_flow_starts
-- The starts (claims) of rate-limited flow groups: one row per claimed job and group, at the
-- claim's store time. A rate window counts the rows of its group in (now - per, now]; rows
-- older than the group's longest window are deleted by the claims that record new ones.
-- grp is FlowLimit.group(limit_key).
CREATE TABLE IF NOT EXISTS flow_starts (
    grp TEXT NOT NULL,
    at  REAL NOT NULL
)

-- name: create_flow_starts_index
-- Counting a group's starts in a window and dropping its old ones are range scans of this.
CREATE INDEX IF NOT EXISTS flow_starts_group ON flow_starts (grp, at)
