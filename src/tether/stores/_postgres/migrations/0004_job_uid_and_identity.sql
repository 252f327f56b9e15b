-- tether PostgreSQL schema, version 4 (issue 18, B): a job uid that is never reused, and the
-- store's identity row that lets every process notice a failover that lost data.
--
-- Applied like 0001: one transaction under pg_advisory_xact_lock, search_path = the schema.

-- 128 random bits per job, never reused. The id comes from a sequence, and a failover to an
-- asynchronous standby that had not replayed the last commits hands those ids out again, so the
-- dedup key "<id>:<attempt>" named two jobs. A volatile default gives every existing row a value
-- of its own (PostgreSQL rewrites the table once, under this migration's lock) and every new row
-- one without a parameter or a round trip. gen_random_uuid() is built in since PostgreSQL 13.
ALTER TABLE jobs ADD COLUMN uid uuid NOT NULL DEFAULT gen_random_uuid();

-- One row: what a process compares with what it saw before (identity.sql, watch.py).
-- epoch: random, written here; a different one means the database was replaced (restored from a
-- backup, another cluster behind the same address). timeline: the server's WAL timeline, which
-- promotion of a standby raises (a failover). failovers / data_loss: each incident counted once
-- by the first process that notices it, for `tether stats` and the dashboard.
CREATE TABLE identity (
    one               boolean     PRIMARY KEY DEFAULT true CHECK (one),
    epoch             uuid        NOT NULL DEFAULT gen_random_uuid(),
    timeline          bigint,
    failovers         bigint      NOT NULL DEFAULT 0,
    data_loss         bigint      NOT NULL DEFAULT 0,
    last_failover_at  timestamptz,
    last_data_loss_at timestamptz
);
INSERT INTO identity DEFAULT VALUES;
