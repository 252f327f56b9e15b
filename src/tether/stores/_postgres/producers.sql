-- Named queries of the PostgreSQL store, part two: what producers and operators write
-- (enqueue, cancel, dead-letter retry). Conventions as in queries.sql ({schema}, epoch
-- seconds at the boundary, statement_timestamp() as the clock).
--
-- A producer never takes a lock on an existing job row: a producer's transaction may stay
-- open for as long as its application likes (conn=), and a lock held there would make the
-- holder's heartbeat wait behind it while the reaper takes the live worker's jobs. The one
-- exception is an enqueue naming parents (workflows.sql, enqueue_after): it must lock them.

-- name: enqueue_one
-- The single-job fast path (no unique_key): a plain INSERT ... SELECT of one row, without the
-- batch statement's unnest, ordinality and ON CONFLICT machinery, which cost as much again as
-- the insert itself for one row. The NOTIFY is what gives idle workers millisecond pick-up;
-- it is skipped for a job that is not due yet (nobody can claim it on waking), and when no
-- worker waits idle (the gate below).
-- The NOTIFY gate, as finish's: NOTIFY takes a cluster-wide lock at commit and signals every
-- listening backend of the database, about a fifth of a lone enqueue's time. A process whose
-- workers wait idle holds the shared advisory lock %(jobs_key)s on its listening connection
-- (listen.py), from before the claim that precedes its wait on. An enqueue that gets the key
-- exclusively (try: never waits) knows no worker waits, skips the NOTIFY and holds the key to
-- its commit, so a listener taking the shared lock later (and then claiming again before it
-- waits) sees this job; one that does not get it notifies. %(gate)s is false inside a
-- caller's transaction (conn=): the key must not be held for the caller's lifetime.
-- request_id (optional): the call is recorded in `requests` by the same statement, and a
-- repeat of it (its reply was lost) inserts nothing and returns the recorded id. Two calls
-- with one request id at the same moment: the second's INSERT into requests fails on the
-- primary key, so the statement, its job included, rolls back; the store then reads the
-- first one's record.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
), prior AS (
    SELECT job_ids FROM {schema}.requests WHERE id = %(request_id)s::text
), inserted AS (
    INSERT INTO {schema}.jobs (task, payload, queue, priority, run_at, max_attempts,
                               max_stalls, created_at, limit_key)
    SELECT %(task)s, %(payload)s, %(queue)s, %(priority)s,
           coalesce(to_timestamp(%(run_at)s::float8),
                    c.ts + %(delay)s::float8 * interval '1 second'),
           %(max_attempts)s, %(max_stalls)s, c.ts, %(limit_key)s::text
    FROM clock c
    WHERE NOT EXISTS (SELECT 1 FROM prior)
    RETURNING id, queue, run_at <= created_at AS due, created_at
), recorded AS (
    INSERT INTO {schema}.requests (id, job_ids, created_at)
    SELECT %(request_id)s::text, ARRAY[i.id], i.created_at FROM inserted i
    WHERE %(request_id)s::text IS NOT NULL
), notified AS (
    SELECT count(pg_notify(%(channel)s, queue)) AS n FROM inserted
    WHERE due AND NOT (%(gate)s::bool AND pg_try_advisory_xact_lock(%(jobs_key)s::bigint))
)
SELECT i.id FROM inserted i CROSS JOIN notified
UNION ALL
SELECT p.job_ids[1] FROM prior p

-- name: enqueue
-- One round trip for the whole batch: parallel arrays unnested WITH ORDINALITY. Ids are drawn
-- with nextval() up front (the identity is "by default"), so inserted rows are matched back to
-- their input by id. The caller has folded repeated unique_keys of the batch onto their first
-- occurrence, so every key appears at most once here.
-- unique_key: ON CONFLICT DO NOTHING, which locks nothing (DO UPDATE locked the live job's
-- row until the producer committed, and the holder's heartbeat waited behind it). The id of
-- the job that holds the key is read from this statement's snapshot ("held"). A holder that
-- another transaction committed after that snapshot conflicts but is invisible: its entry
-- stays unresolved and unique_key_race() aborts the whole statement (SQLSTATE 40001) so the
-- store runs it again with a fresh snapshot. The batch is all or nothing either way.
-- request_id: recorded with the ids in the same statement, as in enqueue_one.
-- pg_notify is transactional: waiters wake when the rows are visible. Gated as in enqueue_one.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
), prior AS (
    SELECT job_ids FROM {schema}.requests WHERE id = %(request_id)s::text
), input AS (
    SELECT nextval('{schema}.jobs_id_seq') AS id, i.*
    FROM unnest(%(tasks)s::text[], %(payloads)s::text[], %(queues)s::text[],
                %(priorities)s::int[], %(run_ats)s::float8[], %(delays)s::float8[],
                %(max_attempts)s::int[], %(max_stalls)s::int[], %(unique_keys)s::text[],
                %(limit_keys)s::text[])
         WITH ORDINALITY AS i(task, payload, queue, priority, run_at, delay, max_attempts,
                              max_stalls, unique_key, limit_key, ord)
    WHERE NOT EXISTS (SELECT 1 FROM prior)
), inserted AS (
    INSERT INTO {schema}.jobs AS j (id, task, payload, queue, priority, run_at, max_attempts,
                                    max_stalls, unique_key, created_at, limit_key)
    SELECT i.id, i.task, i.payload, i.queue, i.priority,
           coalesce(to_timestamp(i.run_at), c.ts + i.delay * interval '1 second'),
           i.max_attempts, i.max_stalls, i.unique_key, c.ts, i.limit_key
    FROM input i CROSS JOIN clock c
    ORDER BY i.ord
    ON CONFLICT (unique_key)
        WHERE status IN ('waiting', 'pending', 'running') AND unique_key IS NOT NULL
    DO NOTHING
    RETURNING j.id, j.queue, j.run_at <= j.created_at AS due
), held AS (
    SELECT j.id, j.unique_key FROM {schema}.jobs j
    WHERE j.unique_key = ANY(%(unique_keys)s::text[])
      AND j.status IN ('waiting', 'pending', 'running')
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
SELECT x.id FROM (
    SELECT r.ord, coalesce(r.id, {schema}.unique_key_race()) AS id
    FROM resolved r CROSS JOIN notified
    UNION ALL
    SELECT p.ord, p.id FROM prior, unnest(prior.job_ids) WITH ORDINALITY AS p(id, ord)
) x
ORDER BY x.ord

-- name: enqueue_plain
-- A batch in which no job has a unique_key (nor parents): what enqueue_many mostly is. The
-- batch statement above pays for keys it may meet: ON CONFLICT makes every row a speculative
-- insertion (an arbiter probe, then a confirmation), RETURNING and the "held" / "resolved"
-- joins match every row back to its input, and the result is sorted: measured, a third of
-- a 10,000-job batch's server time (16 us a job, 10.5 here, 9 for a bare INSERT ... SELECT
-- FROM unnest into this table, issue 23). Here the rows go in with a
-- plain INSERT ... SELECT, and the ids come from "input", where nextval() drew them in input
-- order (a CTE referenced twice is computed once, so each row keeps the id it was inserted
-- with). "inserted" runs to completion although nothing reads it (a data-modifying CTE).
-- Which queues to wake is read from the input, not from RETURNING: a job is due when it has
-- no run_at and no positive delay, or a run_at not after the statement's clock (the same
-- test as enqueue's "run_at <= created_at"). request_id and the NOTIFY gate as in enqueue.
-- The arrays arrive as array literals in text parameters (literals.py: psycopg's list
-- dumpers cost the producer more than this statement costs the server).
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
), prior AS (
    SELECT job_ids FROM {schema}.requests WHERE id = %(request_id)s::text
), input AS (
    SELECT nextval('{schema}.jobs_id_seq') AS id, i.*,
           coalesce(to_timestamp(i.run_at), c.ts + i.delay * interval '1 second') AS due_at,
           c.ts
    FROM unnest(%(tasks)s::text::text[], %(payloads)s::text::text[],
                %(queues)s::text::text[], %(priorities)s::text::int[],
                %(run_ats)s::text::float8[], %(delays)s::text::float8[],
                %(max_attempts)s::text::int[], %(max_stalls)s::text::int[],
                %(limit_keys)s::text::text[])
         WITH ORDINALITY AS i(task, payload, queue, priority, run_at, delay, max_attempts,
                              max_stalls, limit_key, ord)
         CROSS JOIN clock c
    WHERE NOT EXISTS (SELECT 1 FROM prior)
), inserted AS (
    INSERT INTO {schema}.jobs (id, task, payload, queue, priority, run_at, max_attempts,
                               max_stalls, created_at, limit_key)
    SELECT i.id, i.task, i.payload, i.queue, i.priority, i.due_at, i.max_attempts,
           i.max_stalls, i.ts, i.limit_key
    FROM input i
), recorded AS (
    INSERT INTO {schema}.requests (id, job_ids, created_at)
    SELECT %(request_id)s::text, array_agg(i.id ORDER BY i.ord), min(i.ts)
    FROM input i
    WHERE %(request_id)s::text IS NOT NULL
    HAVING count(*) > 0
), notified AS (
    SELECT count(pg_notify(%(channel)s, q.queue)) AS n
    FROM (SELECT DISTINCT queue FROM input WHERE due_at <= ts) q
    WHERE NOT (%(gate)s::bool AND pg_try_advisory_xact_lock(%(jobs_key)s::bigint))
)
SELECT x.id FROM (
    SELECT i.ord, i.id FROM input i CROSS JOIN notified
    UNION ALL
    SELECT p.ord, p.id FROM prior, unnest(prior.job_ids) WITH ORDINALITY AS p(id, ord)
) x
ORDER BY x.ord

-- name: enqueue_shared
-- enqueue_plain for a batch whose jobs differ only in their payloads (what one enqueue_many
-- call makes): the payloads are the one array, every other value a scalar bound once. The
-- server parsed nine array literals of the batch's length for enqueue_plain and the
-- producer built them (issue #23). Ids, request record, NOTIFY gate as in enqueue_plain.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
), prior AS (
    SELECT job_ids FROM {schema}.requests WHERE id = %(request_id)s::text
), input AS (
    SELECT nextval('{schema}.jobs_id_seq') AS id, i.payload, i.ord,
           coalesce(to_timestamp(%(run_at)s::float8),
                    c.ts + %(delay)s::float8 * interval '1 second') AS due_at,
           c.ts
    FROM unnest(%(payloads)s::text::text[]) WITH ORDINALITY AS i(payload, ord)
         CROSS JOIN clock c
    WHERE NOT EXISTS (SELECT 1 FROM prior)
), inserted AS (
    INSERT INTO {schema}.jobs (id, task, payload, queue, priority, run_at, max_attempts,
                               max_stalls, created_at, limit_key)
    SELECT i.id, %(task)s::text, i.payload, %(queue)s::text, %(priority)s::int, i.due_at,
           %(max_attempts)s::int, %(max_stalls)s::int, i.ts, %(limit_key)s::text
    FROM input i
), recorded AS (
    INSERT INTO {schema}.requests (id, job_ids, created_at)
    SELECT %(request_id)s::text, array_agg(i.id ORDER BY i.ord), min(i.ts)
    FROM input i
    WHERE %(request_id)s::text IS NOT NULL
    HAVING count(*) > 0
), notified AS (
    SELECT count(pg_notify(%(channel)s, %(queue)s::text)) AS n
    FROM (SELECT 1 FROM input WHERE due_at <= ts LIMIT 1) q
    WHERE NOT (%(gate)s::bool AND pg_try_advisory_xact_lock(%(jobs_key)s::bigint))
)
SELECT x.id FROM (
    SELECT i.ord, i.id FROM input i CROSS JOIN notified
    UNION ALL
    SELECT p.ord, p.id FROM prior, unnest(prior.job_ids) WITH ORDINALITY AS p(id, ord)
) x
ORDER BY x.ord

-- name: cancel
-- pending or waiting -> cancelled at once; running -> cancel_requested (its holder learns at
-- the next heartbeat, which the NOTIFY on %(signal)s, naming the holder, brings forward: the
-- holder's listener wakes its heartbeater, issue 22). RETURNING reads the new status, which tells the two apart. When no
-- live row matched, the second branch tells "finished" (exists, terminal) from "not found"
-- (no row). A job cancelled here is terminal: its id goes to wait_for_finish's channel
-- (%(done)s). A waiting job's counter goes to 0 (waiting_has_parents): its own links stay
-- unresolved until its parents end, and then only resolve (it is no longer waiting).
-- Invariant 6: a cancelled job with children cancels its waiting descendants in this same
-- statement (resolve_links, as in finish, which announces them; a child that allow_failure
-- released is announced to its queue).
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
), changed AS (
    UPDATE {schema}.jobs j
    SET status = CASE WHEN j.status IN ('pending', 'waiting') THEN 'cancelled' ELSE j.status END,
        cancel_requested = j.cancel_requested OR j.status = 'running',
        finished_at = CASE WHEN j.status IN ('pending', 'waiting') THEN c.ts
                           ELSE j.finished_at END,
        waiting_on = 0
    FROM clock c
    WHERE j.id = %(id)s AND j.status IN ('waiting', 'pending', 'running')
    RETURNING CASE WHEN j.status = 'cancelled' THEN 'cancelled' ELSE 'requested' END AS result,
              j.has_children, j.locked_by
), signalled AS (
    -- delivered at commit, so the early heartbeat it causes reads cancel_requested
    SELECT count(pg_notify(%(signal)s, ch.locked_by)) AS n
    FROM changed ch WHERE ch.result = 'requested' AND ch.locked_by IS NOT NULL
), linked AS (
    SELECT count({schema}.resolve_links(ARRAY[%(id)s::bigint], ARRAY['cancelled'], c.ts,
                                        %(channel)s, %(done)s)) AS n
    FROM changed ch CROSS JOIN clock c
    WHERE ch.result = 'cancelled' AND ch.has_children
), ended AS (
    SELECT count(pg_notify(%(done)s, %(id)s::text)) AS n FROM changed WHERE result = 'cancelled'
)
SELECT result FROM changed CROSS JOIN ended CROSS JOIN linked CROSS JOIN signalled
UNION ALL
SELECT 'finished' FROM {schema}.jobs WHERE id = %(id)s AND NOT EXISTS (SELECT 1 FROM changed)

-- name: retry_failed_ids
-- Dead-letter retry of chosen jobs: counters reset, cancel request and token cleared, attempt
-- kept (it is the fence). One rule for unique keys, the same on every store: a failed job
-- whose key a live (pending or running) job holds stays failed and is reported in the
-- conflicts, and of several failed jobs with one key only the lowest id is retried. (A live
-- holder committed after this statement's snapshot still trips the unique index: the store
-- runs the statement again, and the fresh snapshot sees it.) The queues that got work are
-- notified in the same statement.
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
), target AS (
    SELECT j.id, j.unique_key FROM {schema}.jobs j
    WHERE j.id = ANY(%(ids)s::bigint[]) AND j.status = 'failed'
    ORDER BY j.id
    FOR UPDATE
), blocked AS (
    SELECT t.id FROM target t
    WHERE t.unique_key IS NOT NULL
      AND (EXISTS (SELECT 1 FROM {schema}.jobs l
                   WHERE l.unique_key = t.unique_key
                     AND l.status IN ('waiting', 'pending', 'running'))
           OR EXISTS (SELECT 1 FROM target e WHERE e.unique_key = t.unique_key AND e.id < t.id))
), moved AS (
    UPDATE {schema}.jobs j
    SET status = 'pending', run_at = c.ts, failures = 0, stall_count = 0,
        failure_reason = NULL, finished_at = NULL, cancel_requested = false, lease_token = NULL
    FROM target t CROSS JOIN clock c
    WHERE j.id = t.id AND NOT EXISTS (SELECT 1 FROM blocked b WHERE b.id = t.id)
    RETURNING j.queue
)
SELECT (SELECT count(*) FROM moved),
       (SELECT coalesce(array_agg(b.id ORDER BY b.id), ARRAY[]::bigint[]) FROM blocked b),
       (SELECT count(pg_notify(%(channel)s, q.queue)) FROM (SELECT DISTINCT queue FROM moved) q)

-- name: retry_failed_all
-- Same as retry_failed_ids for every failed job (the prune index covers status = 'failed').
WITH clock AS (
    SELECT coalesce(to_timestamp(%(now)s::float8), statement_timestamp()) AS ts
), target AS (
    SELECT j.id, j.unique_key FROM {schema}.jobs j
    WHERE j.status = 'failed'
    ORDER BY j.id
    FOR UPDATE
), blocked AS (
    SELECT t.id FROM target t
    WHERE t.unique_key IS NOT NULL
      AND (EXISTS (SELECT 1 FROM {schema}.jobs l
                   WHERE l.unique_key = t.unique_key
                     AND l.status IN ('waiting', 'pending', 'running'))
           OR EXISTS (SELECT 1 FROM target e WHERE e.unique_key = t.unique_key AND e.id < t.id))
), moved AS (
    UPDATE {schema}.jobs j
    SET status = 'pending', run_at = c.ts, failures = 0, stall_count = 0,
        failure_reason = NULL, finished_at = NULL, cancel_requested = false, lease_token = NULL
    FROM target t CROSS JOIN clock c
    WHERE j.id = t.id AND NOT EXISTS (SELECT 1 FROM blocked b WHERE b.id = t.id)
    RETURNING j.queue
)
SELECT (SELECT count(*) FROM moved),
       (SELECT coalesce(array_agg(b.id ORDER BY b.id), ARRAY[]::bigint[]) FROM blocked b),
       (SELECT count(pg_notify(%(channel)s, q.queue)) FROM (SELECT DISTINCT queue FROM moved) q)
