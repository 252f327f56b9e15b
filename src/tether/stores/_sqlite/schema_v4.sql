-- Schema of the SQLite store, version 4 (issue 18, B): upgrade steps applied on top of version 3,
-- in file order, in the same transaction as the version row that records them.

-- name: add_jobs_uid
-- 128 random bits per job, drawn at enqueue (enqueue_insert) and never reused. The id is not
-- enough to name a job: a database restored from a backup or a copy that lost its last
-- transactions hands ids out again, and the dedup key "<id>:<attempt>" would then name two
-- jobs. SQLite cannot give a column a non-constant default, so enqueue_insert writes it.
ALTER TABLE jobs ADD COLUMN uid TEXT

-- name: fill_jobs_uid
-- Every job enqueued by an older tether gets its own random uid, in the upgrade's transaction.
UPDATE jobs SET uid = lower(hex(randomblob(16))) WHERE uid IS NULL
