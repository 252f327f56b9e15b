-- Schema of the SQLite store, version 3 (issue #12): upgrade steps applied on top of version 2,
-- in file order, in the same transaction as the version row that records them.

-- name: create_schedules
-- One row per periodic schedule: the latest tick recorded for it (enqueued or skipped) and the
-- job of the latest enqueued tick. schedule_tick writes the tick and its job in one
-- transaction, and only when last_tick < the new tick: this row, not the leader's memory, is
-- what makes "one job per (schedule, tick)" hold across leader changes and replays.
CREATE TABLE IF NOT EXISTS schedules (
    name        TEXT PRIMARY KEY,
    last_tick   REAL NOT NULL,
    last_job_id INTEGER,
    updated_at  REAL NOT NULL
) WITHOUT ROWID
