-- tether PostgreSQL schema, version 3 (issue #12): periodic schedules.
--
-- Applied like 0001: one transaction under pg_advisory_xact_lock, search_path = the schema.

-- One row per periodic schedule: the latest tick recorded for it (enqueued or skipped) and the
-- job of the latest enqueued tick. schedule_tick takes the tick with a conditional upsert
-- (last_tick < the new tick) and enqueues its job in the same transaction, so this row, not a
-- leader's memory, makes "one job per (schedule, tick)" hold across leader changes. The tick
-- is float8 epoch seconds, exactly what the scheduler computed (a timestamptz would round it
-- to microseconds and a replay of the same tick could then compare unequal).
CREATE TABLE schedules (
    name        text             PRIMARY KEY,
    last_tick   double precision NOT NULL,
    last_job_id bigint,
    updated_at  timestamptz      NOT NULL
);
