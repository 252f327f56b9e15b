-- Named queries of the PostgreSQL store, part three: schema versions, maintenance and
-- inspection (pruning, leadership, workers, listing). The lease protocol's statements are in
-- queries.sql, the producers' in producers.sql. Loaded by tether.stores._queries; each block
-- starts with "-- name: X" and says why it is shaped so. {schema} is the store's schema.

-- name: migrate_lock
-- Serialises concurrent migrate() calls for one schema. The xact variant releases itself at
-- commit/rollback, so a crashed migrator never leaves the lock behind.
SELECT pg_advisory_xact_lock(hashtextextended('tether.migrate:' || %(schema)s, 0))

-- name: create_version_table
-- Created before any migration so the version check below has something to read; one row
-- per applied migration file.
CREATE TABLE IF NOT EXISTS {schema}.schema_version (
    version    integer     PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: has_version_table
-- to_regclass yields NULL (no error) when the schema or table is missing, which check_schema
-- turns into a clear SchemaError.
SELECT to_regclass('{schema}.schema_version') IS NOT NULL

-- name: schema_version
-- 0 for a freshly created, empty version table.
SELECT coalesce(max(version), 0) FROM {schema}.schema_version

-- name: record_version
-- Written in the same transaction as the migration it records.
INSERT INTO {schema}.schema_version (version) VALUES (%(version)s)

-- name: prune
-- Bounded delete of old finished jobs. The literal IN list repeats the prune index predicate
-- so even a generic (prepared) plan, which cannot see the value of %(status)s, can prove the
-- partial index applies. SKIP LOCKED keeps two pruners from waiting on each other.
-- Invariant 6: a parent whose child is not terminal yet stays (the child will read its
-- result). "doomed" leaves such parents out as its snapshot sees them (so a kept parent does
-- not eat the batch); "gone" asks again, after the row lock, with has_live_children()'s
-- fresh snapshot: an enqueue that linked a child while this statement ran committed before
-- the lock was granted (it held the parent's row lock), and only the fresh look sees it.
-- Both looks are made only for jobs with has_children. A pruned job's links as a child go
-- with it ("unlinked", by the links' primary key); its links as a parent stay with their
-- children. Returns how many jobs went.
WITH doomed AS (
    SELECT j.id FROM {schema}.jobs j
    WHERE j.status = %(status)s AND j.status IN ('done', 'failed', 'cancelled')
      AND j.finished_at < coalesce(to_timestamp(%(now)s::float8), statement_timestamp())
                          - %(older_than)s::float8 * interval '1 second'
      AND NOT (j.has_children AND EXISTS (
          SELECT 1 FROM {schema}.job_links l JOIN {schema}.jobs c ON c.id = l.child_id
          WHERE l.parent_id = j.id AND c.status NOT IN ('done', 'failed', 'cancelled')))
    ORDER BY j.finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM {schema}.jobs j USING doomed d
    WHERE j.id = d.id AND NOT (j.has_children AND {schema}.has_live_children(j.id))
    RETURNING j.id
), unlinked AS (
    DELETE FROM {schema}.job_links l WHERE l.child_id = ANY(ARRAY(SELECT g.id FROM gone g))
)
SELECT count(*) FROM gone

-- name: prune_requests
-- Request records only need to outlive a client's retries (24 h is far beyond any). Bounded
-- and oldest first over the created_at index; SKIP LOCKED keeps two maintainers apart.
WITH old AS (
    SELECT id FROM {schema}.requests
    WHERE created_at < statement_timestamp() - %(keep)s::float8 * interval '1 second'
    ORDER BY created_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {schema}.requests r USING old WHERE r.id = old.id

-- name: leader_acquire
-- Insert-if-absent-or-expired in one statement: the conflict arm fires when the current lease
-- has run out (term + 1: every acquisition gets a new fence token) or when the caller is the
-- current holder. The holder gets its leadership back unchanged (same term and expiry): an
-- acquire whose reply was lost and that is sent again must leave an acting leader, not a
-- holder that believes it lost. No row back means someone else holds it.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
)
INSERT INTO {schema}.leaders AS l (name, holder, term, expires_at)
SELECT %(name)s, %(holder)s, 1, c.ts + %(ttl)s::float8 * interval '1 second' FROM clock c
ON CONFLICT (name) DO UPDATE
SET holder = EXCLUDED.holder,
    term = CASE WHEN l.expires_at <= (SELECT ts FROM clock) THEN l.term + 1 ELSE l.term END,
    expires_at = CASE WHEN l.expires_at <= (SELECT ts FROM clock) THEN EXCLUDED.expires_at
                      ELSE l.expires_at END
WHERE l.expires_at <= (SELECT ts FROM clock) OR l.holder = EXCLUDED.holder
RETURNING l.name, l.holder, l.term, extract(epoch FROM l.expires_at)::float8

-- name: leader_renew
-- Fenced by (holder, term) and by the lease not having run out yet.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
)
UPDATE {schema}.leaders l SET expires_at = c.ts + %(ttl)s::float8 * interval '1 second'
FROM clock c
WHERE l.name = %(name)s AND l.holder = %(holder)s AND l.term = %(term)s AND l.expires_at > c.ts
RETURNING l.name, l.holder, l.term, extract(epoch FROM l.expires_at)::float8

-- name: leader_release
-- Clear and expire rather than delete: the row keeps the term so the next acquisition gets
-- term + 1, and a second release by the same (holder, term) finds nothing to release.
UPDATE {schema}.leaders SET holder = NULL, expires_at = '-infinity'
WHERE name = %(name)s AND holder = %(holder)s AND term = %(term)s
RETURNING name

-- name: leader_get
-- A plain read of who holds a leadership (expired or not); a released row has no holder.
SELECT name, holder, term, extract(epoch FROM expires_at)::float8
FROM {schema}.leaders WHERE name = %(name)s AND holder IS NOT NULL

-- name: get_job
-- Primary-key lookup.
SELECT id, task, queue, payload, status, priority, extract(epoch FROM run_at)::float8,
       attempt, max_attempts, failures, stall_count, max_stalls, interruptions, locked_by,
       extract(epoch FROM lease_until)::float8, extract(epoch FROM created_at)::float8,
       extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8,
       last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors::text, lease_token, replace(uid::text, '-', ''), limit_key,
       snoozes
FROM {schema}.jobs WHERE id = %(id)s

-- name: list_jobs
-- Keyset pagination on the primary key: "id > after ORDER BY id LIMIT n" costs the same on
-- page 1 and page 10,000. NULL filters mean "any".
SELECT id, task, queue, payload, status, priority, extract(epoch FROM run_at)::float8,
       attempt, max_attempts, failures, stall_count, max_stalls, interruptions, locked_by,
       extract(epoch FROM lease_until)::float8, extract(epoch FROM created_at)::float8,
       extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8,
       last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors::text, lease_token, replace(uid::text, '-', ''), limit_key,
       snoozes
FROM {schema}.jobs
WHERE id > coalesce(%(after_id)s::bigint, 0)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
ORDER BY id
LIMIT %(limit)s

-- name: counts
-- For stats pages; a full aggregate is acceptable off the hot path.
SELECT queue, status, count(*) FROM {schema}.jobs GROUP BY queue, status ORDER BY queue, status

-- name: register_worker
-- Upsert: registering an id again refreshes the row but keeps started_at (the incarnation
-- started when it first registered), the same rule on every store.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
)
INSERT INTO {schema}.workers (id, host, pid, queues, concurrency, started_at, last_seen)
SELECT %(id)s, %(host)s, %(pid)s, %(queues)s::text[], %(concurrency)s, c.ts, c.ts FROM clock c
ON CONFLICT (id) DO UPDATE
SET host = EXCLUDED.host, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
    concurrency = EXCLUDED.concurrency, last_seen = EXCLUDED.last_seen
RETURNING id

-- name: unregister_worker
-- Primary-key delete.
DELETE FROM {schema}.workers WHERE id = %(id)s RETURNING id

-- name: list_workers
-- Small table; ordered for stable display.
SELECT id, host, pid, queues, concurrency, extract(epoch FROM started_at)::float8,
       extract(epoch FROM last_seen)::float8
FROM {schema}.workers ORDER BY started_at, id

-- name: dead_tuples
-- The statistics the server already keeps (flushed by backends about once a second): reading
-- them costs nothing next to the VACUUM they decide on.
SELECT coalesce(n_dead_tup, 0) FROM pg_stat_user_tables WHERE relid = to_regclass('{schema}.jobs')

-- name: vacuum_jobs
-- INDEX_CLEANUP ON: the point is to remove the claim index's dead entries, which a VACUUM
-- deciding that few heap pages have dead items would otherwise skip. SKIP_LOCKED: if another
-- VACUUM (autovacuum, a second maintainer) holds the table, this one is not needed.
VACUUM (INDEX_CLEANUP ON, SKIP_LOCKED) {schema}.jobs
