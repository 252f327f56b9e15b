-- Schema of the SQLite store, version 2 (issue #8): upgrade steps applied on top of version 1, in
-- file order, in the same transaction as the version row that records them. A fresh database
-- gets schema.sql and then this file, so there is one definition of every object.

-- name: add_jobs_lease_token
-- The claim's random token (nonce:id, drawn per claim call), part of every fence. (id, attempt)
-- alone can be forged by an id handed out again after data loss (a restored or recreated file
-- restarts AUTOINCREMENT); the token cannot. Kept after the holder's own outcome (a replayed
-- finish recognises it), cleared by reap and dead-letter retry, overwritten by the next claim.
-- NULL on rows claimed before the upgrade: no new holder can match them.
ALTER TABLE jobs ADD COLUMN lease_token TEXT

-- name: create_requests
-- Request ids of enqueue and claim calls, written in the same transaction as their effect, so a
-- call repeated after its reply was lost (a client retry) is answered from here instead of
-- being applied twice. reply: JSON of the enqueue's ids ('' for a claim, whose jobs are found by
-- their token's nonce). Kept 24 h; housekeeping deletes older records.
CREATE TABLE IF NOT EXISTS requests (
    kind       TEXT NOT NULL CHECK (kind IN ('enqueue', 'claim')),
    id         TEXT NOT NULL,
    reply      TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (kind, id)
) WITHOUT ROWID

-- name: create_requests_age_index
-- Housekeeping deletes the oldest records first, in bounded batches.
CREATE INDEX IF NOT EXISTS requests_age ON requests (created_at)
