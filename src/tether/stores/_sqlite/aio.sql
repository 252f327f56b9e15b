-- Named queries of the SQLite store for waiting on results (issue #12). Loaded by producer.py.

-- name: finished_any
-- Whether a waiter may stop waiting: one of its ids is terminal, or gone (pruned, purged, or
-- never there: it can never finish, and the caller's re-read tells it so). Primary-key probes
-- of the few ids a waiter holds, read with no transaction open: cheap enough to run on every
-- short poll tick.
SELECT EXISTS (
    SELECT 1 FROM json_each(:ids) i LEFT JOIN jobs j ON j.id = i.value
    WHERE j.id IS NULL OR j.status IN ('done', 'failed', 'cancelled')
)
