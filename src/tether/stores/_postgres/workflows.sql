-- Named queries of the PostgreSQL store for job dependencies (issue #20, invariant 6 of
-- tether.stores._contract). Conventions as in queries.sql. The ends of a parent (finish,
-- reap_expired, cancel, purge) resolve its links through resolve_links() (migration 0008),
-- called from their own statements; prune keeps parents through has_live_children().

-- name: enqueue_after
-- enqueue for a batch where some job names parents (NewJob.after): the statement the plain
-- batch enqueue (producers.sql) is, plus the links, in one round trip. The plain statements
-- stay as they were, so an enqueue without `after` pays nothing for this.
-- The links arrive flattened: link_jobs[k] (the job's ordinality in the batch) waits for
-- link_parents[k], its link_pos[k]-th parent (the caller removed duplicates, kept the order).
-- asked: every id the batch names, in batch then `after` order (parent_ids: the same, sorted).
--
-- The race with a parent's end (READ COMMITTED). "parents" locks every named job, in id
-- order (two enqueues never deadlock), FOR NO KEY UPDATE: the lock that finish, reap and
-- cancel need to write the row, and that prune and purge need (FOR UPDATE) to delete it.
--   * A parent being ended right now: the lock waits for that write to commit; READ COMMITTED
--     then hands over the row's newest version, so the status read here is the ended one and
--     the child is linked resolved (pending, or cancelled), not waiting on a parent that will
--     never resolve it again.
--   * A parent ended later: its write waits for this statement's transaction, and then (row
--     flagged has_children) resolves the link through resolve_links(), whose fresh snapshot
--     sees this committed link.
-- So no interleaving loses a child. The price: a caller's transaction (conn=) holds these
-- row locks until it ends, and a running parent's heartbeat and finish wait for it (the only
-- enqueue that locks an existing job row); an enqueue without `after` locks nothing.
-- "flagged" marks the parents has_children (only the ones not marked yet: no new row version
-- for a parent already known to have children).
-- Unknown parent: nothing is written (every write below depends on "missing" being empty)
-- and the one row returned names the first unknown id in batch order, which the store raises
-- as JobNotFound (an exception here would abort a caller's transaction).
-- A job's status comes from its parents as locked: any failed or cancelled (and no
-- allow_failure): cancelled at once, dependency_failed; else any not terminal: waiting, with
-- that many unresolved; else pending. Its links to terminal parents are inserted resolved.
-- unique_key, request_id and the NOTIFY gate: as in enqueue (producers.sql). A waiting job
-- holds its key (the unique index covers 'waiting'). A job that would be cancelled at once
-- while a live job holds its key is not inserted: the holder's id is returned, as for any
-- key hit (a cancelled row would not meet the index, so ON CONFLICT cannot see the hit).
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
), prior AS (
    SELECT job_ids FROM {schema}.requests WHERE id = %(request_id)s::text
), wanted AS (
    SELECT * FROM unnest(%(link_jobs)s::bigint[], %(link_parents)s::bigint[],
                         %(link_pos)s::int[]) AS w(ord, parent_id, pos)
), parents AS MATERIALIZED (
    SELECT p.id, p.status, p.has_children FROM {schema}.jobs p
    WHERE p.id = ANY(%(parent_ids)s::bigint[]) AND NOT EXISTS (SELECT 1 FROM prior)
    ORDER BY p.id
    FOR NO KEY UPDATE
), missing AS MATERIALIZED (
    SELECT a.id AS parent_id
    FROM unnest(%(asked)s::bigint[]) WITH ORDINALITY AS a(id, ord)
    WHERE NOT EXISTS (SELECT 1 FROM prior)
      AND NOT EXISTS (SELECT 1 FROM parents p WHERE p.id = a.id)
    ORDER BY a.ord
    LIMIT 1
), flagged AS (
    UPDATE {schema}.jobs j SET has_children = true
    FROM parents p
    WHERE j.id = p.id AND NOT p.has_children AND NOT EXISTS (SELECT 1 FROM missing)
), verdict AS (
    SELECT w.ord,
           count(*) FILTER (WHERE p.status NOT IN ('done', 'failed', 'cancelled')) AS unresolved,
           (array_agg(p.id || ' ended ' || p.status ORDER BY w.pos)
                FILTER (WHERE p.status IN ('failed', 'cancelled')))[1] AS failed
    FROM wanted w JOIN parents p ON p.id = w.parent_id
    GROUP BY w.ord
), input AS (
    SELECT nextval('{schema}.jobs_id_seq') AS id, i.*
    FROM unnest(%(tasks)s::text[], %(payloads)s::text[], %(queues)s::text[],
                %(priorities)s::int[], %(run_ats)s::float8[], %(delays)s::float8[],
                %(max_attempts)s::int[], %(max_stalls)s::int[], %(unique_keys)s::text[],
                %(limit_keys)s::text[], %(allow_failures)s::bool[])
         WITH ORDINALITY AS i(task, payload, queue, priority, run_at, delay, max_attempts,
                              max_stalls, unique_key, limit_key, allow_failure, ord)
    WHERE NOT EXISTS (SELECT 1 FROM prior) AND NOT EXISTS (SELECT 1 FROM missing)
), held AS (
    SELECT j.id, j.unique_key FROM {schema}.jobs j
    WHERE j.unique_key = ANY(%(unique_keys)s::text[])
      AND j.status IN ('waiting', 'pending', 'running')
), shaped AS (
    SELECT i.*, v.unresolved, v.failed,
           CASE WHEN v.failed IS NOT NULL AND NOT i.allow_failure THEN 'cancelled'
                WHEN v.unresolved > 0 THEN 'waiting'
                ELSE 'pending' END AS status
    FROM input i LEFT JOIN verdict v ON v.ord = i.ord
), inserted AS (
    INSERT INTO {schema}.jobs AS j (id, task, payload, queue, priority, run_at, max_attempts,
                                    max_stalls, unique_key, created_at, limit_key, status,
                                    waiting_on, allow_failure, finished_at, failure_reason,
                                    last_error, errors)
    SELECT s.id, s.task, s.payload, s.queue, s.priority,
           coalesce(to_timestamp(s.run_at), c.ts + s.delay * interval '1 second'),
           s.max_attempts, s.max_stalls, s.unique_key, c.ts, s.limit_key, s.status,
           CASE WHEN s.status = 'waiting' THEN s.unresolved ELSE 0 END, s.allow_failure,
           CASE WHEN s.status = 'cancelled' THEN c.ts END,
           CASE WHEN s.status = 'cancelled' THEN 'dependency_failed' END,
           CASE WHEN s.status = 'cancelled' THEN 'dependency_failed: job ' || s.failed END,
           CASE WHEN s.status = 'cancelled'
                THEN jsonb_build_array(jsonb_build_object(
                    'attempt', 0, 'error', 'dependency_failed: job ' || s.failed,
                    'reason', 'dependency_failed', 'at', extract(epoch FROM c.ts)::float8,
                    'owner', NULL))
                ELSE '[]'::jsonb END
    FROM shaped s CROSS JOIN clock c
    WHERE NOT (s.status = 'cancelled'
               AND EXISTS (SELECT 1 FROM held h WHERE h.unique_key = s.unique_key))
    ORDER BY s.ord
    ON CONFLICT (unique_key)
        WHERE status IN ('waiting', 'pending', 'running') AND unique_key IS NOT NULL
    DO NOTHING
    RETURNING j.id, j.queue, j.status = 'pending' AND j.run_at <= j.created_at AS due
), linked AS (
    -- Only for the jobs really inserted: a unique_key hit links nothing new.
    INSERT INTO {schema}.job_links (child_id, parent_id, pos, resolved)
    SELECT ins.id, w.parent_id, w.pos, p.status IN ('done', 'failed', 'cancelled')
    FROM inserted ins
    JOIN input i ON i.id = ins.id
    JOIN wanted w ON w.ord = i.ord
    JOIN parents p ON p.id = w.parent_id
), resolved AS (
    SELECT i.ord, coalesce(ins.id, h.id) AS id
    FROM input i
    LEFT JOIN inserted ins ON ins.id = i.id
    LEFT JOIN held h ON ins.id IS NULL AND h.unique_key = i.unique_key
), recorded AS (
    INSERT INTO {schema}.requests (id, job_ids, created_at)
    SELECT %(request_id)s::text, array_agg(r.id ORDER BY r.ord), min(c.ts)
    FROM resolved r CROSS JOIN clock c
    WHERE %(request_id)s::text IS NOT NULL
    HAVING count(*) > 0
), notified AS (
    SELECT count(pg_notify(%(channel)s, q.queue)) AS n
    FROM (SELECT DISTINCT queue FROM inserted WHERE due) q
    WHERE NOT (%(gate)s::bool AND pg_try_advisory_xact_lock(%(jobs_key)s::bigint))
)
SELECT x.id, x.missing FROM (
    SELECT r.ord, coalesce(r.id, {schema}.unique_key_race()) AS id, NULL::bigint AS missing
    FROM resolved r CROSS JOIN notified
    UNION ALL
    SELECT p.ord, p.id, NULL FROM prior, unnest(prior.job_ids) WITH ORDINALITY AS p(id, ord)
    UNION ALL
    SELECT 0, NULL, m.parent_id FROM missing m
) x
ORDER BY x.ord

-- name: get_jobs
-- A chord's callback reads its parents' results: primary-key probes of the asked ids, in the
-- order asked (the caller removed duplicates; unknown ids find no row and are left out).
SELECT j.id, j.task, j.queue, j.payload, j.status, j.priority,
       extract(epoch FROM j.run_at)::float8, j.attempt, j.max_attempts, j.failures,
       j.stall_count, j.max_stalls, j.interruptions, j.locked_by,
       extract(epoch FROM j.lease_until)::float8, extract(epoch FROM j.created_at)::float8,
       extract(epoch FROM j.started_at)::float8, extract(epoch FROM j.finished_at)::float8,
       j.last_error, j.failure_reason, j.result, j.checkpoint, j.progress, j.unique_key,
       j.cancel_requested, j.errors::text, j.lease_token, replace(j.uid::text, '-', ''),
       j.limit_key, j.snoozes
FROM unnest(%(ids)s::bigint[]) WITH ORDINALITY AS w(id, ord)
JOIN {schema}.jobs j ON j.id = w.id
ORDER BY w.ord

-- name: job_links
-- One job's place in a workflow: its counter and flag, its parents in `after` order (the
-- primary key's range for the child, pruned parents included: links stay with the child) and
-- its children in id order (the parent index's range; a pruned child took its links along).
-- No row: unknown job.
SELECT j.waiting_on, j.allow_failure,
       ARRAY(SELECT l.parent_id FROM {schema}.job_links l WHERE l.child_id = j.id
             ORDER BY l.pos),
       ARRAY(SELECT l.child_id FROM {schema}.job_links l WHERE l.parent_id = j.id
             ORDER BY l.child_id)
FROM {schema}.jobs j WHERE j.id = %(id)s
