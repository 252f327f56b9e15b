-- Named queries of the SQLite store's periodic schedules (issue #12), run by schedules.py
-- inside one BEGIN IMMEDIATE transaction: the write lock serialises every caller, so the
-- conditional upsert below sees the latest committed tick.

-- name: schedule_claim
-- Record the tick iff no tick >= it is recorded: an insert for a new schedule, else an update
-- guarded by last_tick < :tick. RETURNING yields a row only when the tick was taken, which is
-- what lets the caller enqueue its job in the same transaction (or nothing at all). A replay
-- of the same tick, or a late leader with an older one, gets no row and writes nothing.
-- spec (the schedule's fingerprint) is recorded with the tick it was taken under; NULL keeps
-- the recorded one. The row is never pruned, so a later leader can always tell a deploy
-- changed the schedule (the last job, where it was read before, may be pruned).
INSERT INTO schedules (name, last_tick, last_job_id, updated_at, spec)
VALUES (:name, :tick, NULL, :now, :spec)
ON CONFLICT (name) DO UPDATE SET last_tick = excluded.last_tick, updated_at = excluded.updated_at,
                                 spec = coalesce(excluded.spec, schedules.spec)
WHERE schedules.last_tick < excluded.last_tick
RETURNING name

-- name: schedule_set_job
-- The job enqueued for the tick just taken (same transaction). A skipped tick keeps the job of
-- the last enqueued one: last_job_id names "the job of the latest enqueued tick".
UPDATE schedules SET last_job_id = :job_id WHERE name = :name

-- name: schedules_list
-- Every schedule for `tether schedules`: a handful of rows, read by primary-key order.
SELECT name, last_tick, last_job_id, updated_at, spec FROM schedules ORDER BY name
