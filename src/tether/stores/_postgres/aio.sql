-- Named queries of the PostgreSQL store for waiting on results (issue #12). Conventions as in
-- queries.sql.

-- name: finished_any
-- Whether a waiter may stop waiting: one of its ids is terminal, or gone (pruned, purged, never
-- there: it can never finish, and the caller's re-read says so). Run after the waiter is
-- registered with the listener, so a finish committed before this read is seen here and one
-- committed after it is notified. Primary-key probes of the waiter's few ids.
SELECT EXISTS (
    SELECT 1 FROM unnest(%(ids)s::bigint[]) AS w(id)
    LEFT JOIN {schema}.jobs j ON j.id = w.id
    WHERE j.id IS NULL OR j.status IN ('done', 'failed', 'cancelled')
)

-- name: key_share
-- Run by the listening connection while its process has waiters: the shared advisory lock on
-- the done key (finish waiters) tells every finish "someone may wait, notify" (see finish in
-- queries.sql); the one on the jobs key (idle workers) tells every enqueue the same (see
-- enqueue_one in producers.sql). Only tried: a finish or an enqueue holds its key exclusively
-- for milliseconds, and the listening thread must never block (wake-ups flow through it).
SELECT pg_try_advisory_lock_shared(%(key)s::bigint)

-- name: key_unshare
-- When the waiters are gone (and the linger passed): the writers may skip their NOTIFY again.
SELECT pg_advisory_unlock_shared(%(key)s::bigint)
