-- tether PostgreSQL schema, version 8 (issue #20): job dependencies (workflows).
--
-- Applied like 0001: one transaction under pg_advisory_xact_lock, search_path = the schema.
-- The rules are invariant 6 of tether.stores._contract; how this store keeps them under READ
-- COMMITTED is told in workflows.sql (enqueue_after) and at resolve_links below.

-- A job enqueued with `after` is 'waiting' until its parents resolve. The constraint made by
-- 0001 is replaced by a looser one; NOT VALID because every existing row passed the stricter
-- one already, so there is nothing to prove, and proving it would scan the whole table under
-- this migration's exclusive lock (new and updated rows are checked all the same).
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('waiting', 'pending', 'running', 'done', 'failed', 'cancelled')) NOT VALID;

-- waiting_on: how many parents have not resolved yet (the counter two finishing parents
-- decrement under the child's row lock). allow_failure: a parent that ends failed or
-- cancelled counts as resolved. has_children: set by enqueue, under the parent's row lock,
-- on every job named in an `after`: the writes that end a job look for links to resolve only
-- when it is set, so a job without children costs finish nothing more. Constant defaults:
-- no table rewrite.
ALTER TABLE jobs ADD COLUMN waiting_on integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN allow_failure boolean NOT NULL DEFAULT false;
ALTER TABLE jobs ADD COLUMN has_children boolean NOT NULL DEFAULT false;

-- The database keeps the counter honest as it keeps running_has_lease: waiting exactly while
-- some parent is unresolved. NOT VALID for the reason above (every existing row has 0 and is
-- not waiting).
ALTER TABLE jobs ADD CONSTRAINT waiting_has_parents
    CHECK ((status = 'waiting') = (waiting_on > 0)) NOT VALID;

-- A waiting job holds its unique_key like a pending one (it is not terminal: enqueue of the
-- same key returns it). Same name, so enqueue's race rule (plumbing.race) still knows it; the
-- old ON CONFLICT predicate implies the new one, so a process not restarted yet still finds
-- its arbiter.
DROP INDEX jobs_unique_key_idx;
CREATE UNIQUE INDEX jobs_unique_key_idx ON jobs (unique_key)
    WHERE status IN ('waiting', 'pending', 'running') AND unique_key IS NOT NULL;

-- One row per (parent, child) given at enqueue, kept until the child is pruned or purged (so
-- a child still lists a parent pruned since). pos: the parent's place in the child's `after`
-- (parent_results order). resolved: set once, by the write that ended the parent (or at
-- enqueue when the parent had ended already); that write changes the child only if this flag
-- went from false to true in it, so a link never counts twice. No foreign keys: a parent may
-- go before its child, and a trigger per deleted job would tax every prune.
CREATE TABLE job_links (
    child_id  bigint  NOT NULL,
    parent_id bigint  NOT NULL,
    pos       integer NOT NULL,
    resolved  boolean NOT NULL,
    PRIMARY KEY (child_id, parent_id)
);
-- A parent's children: job_links() in ascending order, and the unresolved links the end of a
-- parent resolves (only read for jobs with has_children).
CREATE INDEX job_links_parent_idx ON job_links (parent_id, child_id);

-- Resolve the unresolved links of jobs that just ended (parents[i] ended as ended[i]: 'done',
-- 'failed' or 'cancelled'), at time `at`, and cancel the waiting descendants that a failed or
-- cancelled parent dooms, level by level. Announces what it changed itself, in the caller's
-- transaction (delivered at its commit): the children cancelled on done_channel (their ids,
-- or '*' past NOTIFY's payload limit, as finish does), the queues of children released and
-- due on jobs_channel. Returns how many jobs it changed.
--
-- Called by the statement that ended the parents (finish, reap_expired, cancel, purge), and
-- only when one of them has has_children. VOLATILE on purpose: under READ COMMITTED each
-- statement below takes a fresh snapshot, taken after the calling statement got the parents'
-- row locks. An enqueue that linked a child to one of them held that parent's row lock until
-- it committed, so by then its link is visible here (the caller's own snapshot is older and
-- would miss it: the child would wait forever). An enqueue that comes later waits for the
-- caller's lock, then reads the parent's ended status and links the child resolved.
-- The caller has finished writing the parents before this runs (it aggregates them first),
-- and only waiting rows are written here, so the two never touch one row.
-- The notifications are sent here rather than by the callers so that a finish of jobs
-- without children keeps the statement it had, plus one empty aggregate (measured).
-- SET search_path FROM CURRENT: the migration's path, i.e. this schema, whatever the caller's
-- connection uses (no session state: it holds behind a transaction pooler).
CREATE FUNCTION resolve_links(parents bigint[], ended text[], at timestamptz,
                              jobs_channel text, done_channel text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT AS $$
DECLARE
    ids bigint[];
    statuses text[];
    queues text[];
    dues boolean[];
    cancelled bigint[] := '{}';
    woken text[] := '{}';
    changes integer := 0;
    listed text;
BEGIN
    -- Each round: the links of `parents` flip to resolved (once: the row lock and the
    -- re-check of "NOT resolved" let only one writer flip a link), each child still waiting
    -- is locked in id order (two writers releasing overlapping children never deadlock) and
    -- either counts its resolved parents down (released at 0) or is cancelled. The children
    -- cancelled are the next round's parents. Ends because a link flips once.
    WHILE cardinality(parents) > 0 LOOP
        WITH frontier AS (
            SELECT * FROM unnest(parents, ended) AS f(id, status)
        ), flipped AS (
            UPDATE job_links l SET resolved = true
            FROM frontier f
            WHERE l.parent_id = f.id AND NOT l.resolved
            RETURNING l.child_id, l.parent_id, f.status
        ), per_child AS (
            -- A child with several parents resolved in this round: how many, and the first
            -- failed or cancelled one (the one its error names).
            SELECT x.child_id, count(*) AS n,
                   (array_agg(x.parent_id || ' ended ' || x.status ORDER BY x.parent_id)
                        FILTER (WHERE x.status <> 'done'))[1] AS failed
            FROM flipped x GROUP BY x.child_id
        ), locked AS (
            SELECT c.id FROM jobs c
            WHERE c.id IN (SELECT p.child_id FROM per_child p) AND c.status = 'waiting'
            ORDER BY c.id
            FOR NO KEY UPDATE
        ), changed AS (
            -- The row is the locked, newest version (a concurrent writer's decrement is
            -- counted on): READ COMMITTED re-reads it, and re-checks "waiting".
            UPDATE jobs c
            SET status = CASE
                    WHEN p.failed IS NOT NULL AND NOT c.allow_failure THEN 'cancelled'
                    WHEN c.waiting_on - p.n <= 0 THEN 'pending'
                    ELSE 'waiting'
                END,
                waiting_on = CASE
                    WHEN p.failed IS NOT NULL AND NOT c.allow_failure THEN 0
                    ELSE greatest(c.waiting_on - p.n, 0)
                END,
                run_at = CASE
                    WHEN (p.failed IS NULL OR c.allow_failure) AND c.waiting_on - p.n <= 0
                        THEN greatest(c.run_at, at)
                    ELSE c.run_at
                END,
                finished_at = CASE WHEN p.failed IS NOT NULL AND NOT c.allow_failure THEN at
                                   ELSE c.finished_at END,
                failure_reason = CASE WHEN p.failed IS NOT NULL AND NOT c.allow_failure
                                      THEN 'dependency_failed' ELSE c.failure_reason END,
                last_error = CASE WHEN p.failed IS NOT NULL AND NOT c.allow_failure
                                  THEN 'dependency_failed: job ' || p.failed
                                  ELSE c.last_error END,
                errors = CASE
                    WHEN p.failed IS NOT NULL AND NOT c.allow_failure
                        THEN c.errors || jsonb_build_array(jsonb_build_object(
                            'attempt', c.attempt, 'error', 'dependency_failed: job ' || p.failed,
                            'reason', 'dependency_failed', 'at', extract(epoch FROM at)::float8,
                            'owner', NULL))
                    ELSE c.errors
                END
            FROM per_child p, locked k
            WHERE c.id = p.child_id AND c.id = k.id AND c.status = 'waiting'
            RETURNING c.id, c.status, c.queue, c.run_at <= at AS due
        )
        SELECT coalesce(array_agg(ch.id), '{}'), coalesce(array_agg(ch.status), '{}'),
               coalesce(array_agg(ch.queue), '{}'), coalesce(array_agg(ch.due), '{}')
        INTO ids, statuses, queues, dues
        FROM changed ch WHERE ch.status <> 'waiting';

        changes := changes + cardinality(ids);
        parents := ARRAY(SELECT x.id FROM unnest(ids, statuses) AS x(id, status)
                         WHERE x.status = 'cancelled');
        ended := array_fill('cancelled'::text, ARRAY[cardinality(parents)]);
        cancelled := cancelled || parents;
        woken := woken || ARRAY(SELECT x.queue FROM unnest(statuses, queues, dues)
                                    AS x(status, queue, due)
                                WHERE x.status = 'pending' AND x.due);
    END LOOP;

    -- wait_for_finish: one notification for every child cancelled (see finish).
    IF cardinality(cancelled) > 0 THEN
        listed := array_to_string(cancelled, ',');
        PERFORM pg_notify(done_channel, CASE WHEN length(listed) <= 7900 THEN listed
                                             ELSE '*' END);
    END IF;
    -- Idle workers of a released child's queue claim it at once (one per queue).
    PERFORM pg_notify(jobs_channel, q) FROM (SELECT DISTINCT unnest(woken) AS q) w;
    RETURN changes;
END
$$;

-- Whether a job has a child that is not terminal (prune keeps such a parent: the child will
-- read its result). VOLATILE for the same reason as resolve_links: prune asks it after taking
-- the row lock, with a fresh snapshot that sees a child an enqueue committed meanwhile.
CREATE FUNCTION has_live_children(parent bigint) RETURNS boolean
LANGUAGE sql VOLATILE
SET search_path FROM CURRENT AS $$
    SELECT EXISTS (
        SELECT 1 FROM job_links l JOIN jobs c ON c.id = l.child_id
        WHERE l.parent_id = parent AND c.status NOT IN ('done', 'failed', 'cancelled')
    )
$$;
