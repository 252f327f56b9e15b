-- tether PostgreSQL schema, version 10 (issue #22): liveness tokens, so the jobs of a worker
-- process that died come back at once instead of when their leases run out.
--
-- Applied like 0001: one transaction under pg_advisory_xact_lock, search_path = the schema.
-- The token itself is a session advisory lock, held by the worker on a dedicated connection
-- (liveness.py): the server drops it when that session ends, which is when the process dies.
-- This table only says which workers took one (a worker without a row, an older release or a
-- remote worker, is never judged dead) and under which key.

-- worker_id: the worker incarnation (jobs.locked_by); lock_key: the bigint advisory lock it
-- holds (random, so schemas sharing a database never collide); reaped: it was found dead and
-- every job it held was taken back, so the sub-second check no longer probes it (a dead
-- leader holder is still matched through it). A few hundred rows at most: one per worker
-- process start, deleted with the worker's row (delete_dead_workers).
CREATE TABLE live_tokens (
    worker_id  text        PRIMARY KEY,
    lock_key   bigint      NOT NULL,
    taken_at   timestamptz NOT NULL DEFAULT now(),
    reaped     boolean     NOT NULL DEFAULT false
);
