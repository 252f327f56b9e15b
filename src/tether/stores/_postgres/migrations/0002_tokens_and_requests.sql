-- tether PostgreSQL schema, version 2 (issue #8): the per-claim lease token, request ids for
-- replay-safe enqueues and claims, and the unique_key race signal.
--
-- Applied like 0001: one transaction under pg_advisory_xact_lock, search_path = the schema.

-- The claim's random fence token, "<nonce>:<job id>" (tether.stores._contract, invariant 2). Set
-- by claim, matched by every fenced write, kept after the holder's own outcome (a replayed
-- finish recognises what it already applied) and cleared by reap and dead-letter retry.
ALTER TABLE jobs ADD COLUMN lease_token text;

-- A digest of the outcome the token's holder had applied (owner, kind, result, error, reason,
-- delay): a replay of exactly that outcome is accepted, any other late outcome of the same
-- lease is still rejected. Only meaningful while lease_token is the one the outcome names.
ALTER TABLE jobs ADD COLUMN outcome_digest text;

-- A replayed claim (its reply was lost; the worker asks again with the same request id, which
-- is the tokens' nonce) finds the jobs it already took. Running rows only: the index stays as
-- small as the running set, and one probe per claim costs microseconds. The key is the token
-- up to its last ':' (the nonce; a request id may itself contain ':').
CREATE INDEX jobs_nonce_idx ON jobs (left(lease_token, -strpos(reverse(lease_token), ':')))
    WHERE status = 'running';

-- Enqueues by request id: a repeat of the same call (its reply was lost) inserts nothing and
-- returns these ids. Written in the same statement as the jobs it records; housekeeping
-- deletes records older than a day (created_at index).
CREATE TABLE requests (
    id         text        PRIMARY KEY,
    job_ids    bigint[]    NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX requests_created_idx ON requests (created_at);

-- Raised by enqueue when a unique_key conflicted with a live job committed by another
-- transaction after this statement's snapshot was taken: the id of that job is not visible
-- yet, so the statement rolls back whole (SQLSTATE 40001, serialization_failure: "retry") and
-- is run again with a fresh snapshot. Enqueue never takes a lock on an existing job row (that
-- made a producer's open transaction block the holder's heartbeat).
CREATE FUNCTION unique_key_race() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'a live job with this unique_key was committed concurrently; retry'
        USING ERRCODE = 'serialization_failure';
END
$$;
