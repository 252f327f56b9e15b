-- tether PostgreSQL schema, version 6 (issue #19): flow limits and snooze.
--
-- Applied like 0001: one transaction under pg_advisory_xact_lock, search_path = the schema.

-- The value a task's fleet-wide limits are partitioned by, stored with the job at enqueue
-- (NULL: no key; '' is a key). snoozes counts "snoozed" outcomes (not failures, not attempts
-- that count). Neither needs a table rewrite: a nullable column, and a constant default.
ALTER TABLE jobs ADD COLUMN limit_key text;
ALTER TABLE jobs ADD COLUMN snoozes integer NOT NULL DEFAULT 0;

-- The flow claim's groups: every pending job by (queue, task, key) in claim order, the key
-- spelled coalesce('=' || limit_key, '') so that "no key" is a group of its own that sorts and
-- compares like any other ('' is never '=' || anything). A claim with limits finds the groups
-- with a loose index scan (one seek per group, past however long a backlog) and reads only
-- the heads of the groups with room (flow.sql, flow_groups / flow_heads). Pending rows
-- only, like jobs_claim_idx: finished history never costs it anything (a claim moves a row
-- out of both partial indexes at once). The predicate's second term is always true; it is
-- there so that only statements that name it (the flow ones) can use this index: with
-- "status = 'pending'" alone the planner took it for the plain multi-queue claim, whose plan
-- must stay what it was (jobs_claim_idx; tests/postgres/test_explain.py).
CREATE INDEX jobs_flow_idx ON jobs (queue, task, (coalesce('=' || limit_key, '')), priority,
                                    run_at, id)
    WHERE status = 'pending' AND run_at > '-infinity';

-- The starts of rate-limited groups (FlowLimit.group): one row per claimed job and group, at
-- the claim's time. A limited claim counts a group's rows in its window and deletes the
-- group's rows older than the longest window as it records new ones, so the table stays as
-- small as the windows. No primary key: rows are only counted and range-deleted. grp is
-- compared bytewise (COLLATE "C"): a per-key limit counts the range of its groups, which a
-- locale collation (that ignores the \x1f separators) would not keep contiguous.
CREATE TABLE flow_starts (
    grp text COLLATE "C" NOT NULL,
    at  timestamptz NOT NULL
);
CREATE INDEX flow_starts_idx ON flow_starts (grp, at);
