-- Schema of the SQLite store, version 8 (issue #23, the worker's CPU per job): upgrade steps
-- applied on top of version 7, in file order, in the same transaction as the version row that
-- records them.

-- name: add_jobs_outcome_owner
-- The owner whose finish applied the job's latest outcome (the locked_by that finish clears),
-- kept with the lease_token it leaves: a finish repeated after its reply was lost is
-- recognised as a replay only when attempt, token AND owner match (finish_replayed), so another
-- owner holding that token is still turned down. NULL on rows finished before the upgrade: a
-- replay of such a finish is reported rejected (the holder hears its lease was lost), never a
-- forged outcome accepted.
ALTER TABLE jobs ADD COLUMN outcome_owner TEXT

-- name: drop_jobs_unique_index
-- Rebuilt below with a narrower WHERE.
DROP INDEX jobs_unique

-- name: create_jobs_unique_index
-- As in version 7, without the jobs that have no unique_key: version 7's WHERE named statuses
-- only, so every live job sat in the index under a NULL key, and every claim and finish (which
-- change status) deleted and re-inserted its entry for nothing; measured ~10 % of a claim's
-- instructions. SQLite proves "unique_key IS NOT NULL" from any comparison on unique_key, so
-- enqueue_find_unique, retry_failed and retry_conflicts (unique_key = ...) still use it.
CREATE UNIQUE INDEX jobs_unique ON jobs (unique_key)
    WHERE unique_key IS NOT NULL
      AND (status = 'waiting' OR status = 'pending' OR status = 'running')
