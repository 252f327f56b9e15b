-- Named queries of the SQLite store for job dependencies (issue #20, invariant 6 of the
-- contract), loaded by links.py. Every write runs inside the BEGIN IMMEDIATE transaction of the
-- call that needs it (an enqueue with after, or a finish, reap, cancel, purge or prune whose
-- jobs have children): the write lock serialises every writer of the file, so a parent cannot
-- end between a child's enqueue reading its status and writing the link, and two parents of
-- one child never decrement its counter at once. Python runs the dependency statements only
-- when a job it wrote has children (jobs.has_children, returned by the write itself), so an
-- application without workflows never runs any of them.

-- name: unknown_parent
-- The first id of an enqueue's after lists (:ids, a JSON array: the batch's lists in batch
-- order) that names no job, read before any job of the batch is inserted, so ids of the same
-- batch do not count and a refused batch writes nothing. A primary-key probe per id.
SELECT a.value FROM json_each(:ids) AS a
WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = a.value)
ORDER BY a.key
LIMIT 1

-- name: enqueue_insert_after
-- One new job with parents (:after, a JSON array without duplicates), in the status its
-- parents give it at this write: cancelled when one ended failed or cancelled and the job
-- does not allow failure (reason dependency_failed, one error record naming the first such
-- parent in after order, attempt 0, no owner, finished now); else waiting on the parents not
-- ended yet (waiting_on counts them); else pending, due as a plain enqueue is. The rest is
-- enqueue_insert's (queries.sql). Parents are primary-key probes; the unary + keeps the
-- planner off the status indexes (the parents, not a status, drive the read).
INSERT INTO jobs (task, queue, payload, status, priority, run_at, max_attempts, max_stalls,
                  unique_key, created_at, uid, limit_key, waiting_on, allow_failure,
                  finished_at, failure_reason, last_error, errors)
SELECT :task, :queue, :payload,
       CASE WHEN f.id IS NOT NULL THEN 'cancelled' WHEN o.n > 0 THEN 'waiting' ELSE 'pending' END,
       :priority, coalesce(:run_at, :now + :delay), :max_attempts, :max_stalls, :unique_key,
       :now, lower(hex(randomblob(16))), :limit_key,
       CASE WHEN f.id IS NOT NULL THEN 0 ELSE o.n END,
       :allow_failure,
       CASE WHEN f.id IS NOT NULL THEN :now END,
       CASE WHEN f.id IS NOT NULL THEN 'dependency_failed' END,
       f.error,
       CASE WHEN f.id IS NULL THEN '[]'
            ELSE json_array(json_object('attempt', 0, 'error', f.error,
                                        'reason', 'dependency_failed', 'at', :now,
                                        'owner', NULL)) END
FROM (SELECT count(*) AS n FROM json_each(:after) AS a
      JOIN jobs AS p ON p.id = a.value
      WHERE +p.status NOT IN ('done', 'failed', 'cancelled')) AS o
LEFT JOIN (SELECT p.id AS id,
                  'dependency_failed: job ' || p.id || ' ended ' || p.status AS error
           FROM json_each(:after) AS a
           JOIN jobs AS p ON p.id = a.value
           WHERE :allow_failure = 0 AND +p.status IN ('failed', 'cancelled')
           ORDER BY a.key
           LIMIT 1) AS f ON 1

-- name: link_parents
-- The links of the batch's new jobs with parents, one statement after their inserts (:links, a
-- JSON array of [child, [parent, ...]]), one row per parent in after order. No parent changes
-- status within the batch (a job of the batch is no parent of another), so the statuses read
-- here are the ones enqueue_insert_after counted. A parent that has ended already was counted
-- there: its link is resolved at once, so its end (or a dead-letter retry of it that ends
-- again) never counts for this child a second time.
INSERT INTO job_links (child, pos, parent, resolved)
SELECT json_extract(c.value, '$[0]'), a.key, a.value,
       +p.status IN ('done', 'failed', 'cancelled')
FROM json_each(:links) AS c
JOIN json_each(c.value, '$[1]') AS a
JOIN jobs AS p ON p.id = a.value

-- name: mark_parents
-- The parents now have a child (:ids, a JSON array of the batch's parents without duplicates):
-- their end resolves links, and prune keeps them while a child is not terminal. Every parent,
-- ended or not: a done parent with a pending child must not be pruned before the child reads
-- its result. Rows already marked are not written again.
UPDATE jobs SET has_children = 1
WHERE id IN (SELECT value FROM json_each(:ids)) AND has_children = 0

-- name: cancel_descendants
-- Step 1 of resolving the links of jobs that just ended (:ended, a JSON array of [id, how],
-- how being the job's new status, or 'purged' for a job purge deleted before it ended): the
-- waiting jobs to cancel, found by a recursive walk: the children (without allow_failure) of an
-- ended job that is not done, through links not resolved yet, then the waiting children
-- (without allow_failure) of those, transitively. The walk is bounded by the links of the
-- waiting part of the graph (UNION drops a row reached twice; a child is enqueued after its
-- parents, so there is no cycle). Each doomed job is cancelled once, reason dependency_failed,
-- its error record naming its first failing parent in after order (min(pos): SQLite takes
-- the bare columns from that row), attempt unchanged (0: it never ran), no owner. Only waiting
-- jobs are touched. The GROUP BY computes the whole walk before the first row is updated.
-- RETURNING: the cancelled ids, whose own links step 2 resolves.
WITH RECURSIVE
ended(id, how) AS (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:ended)
),
doomed(id, pos, parent, how) AS (
    SELECT l.child, l.pos, l.parent, e.how
    FROM ended AS e
    JOIN job_links AS l ON l.parent = e.id
    JOIN jobs AS c ON c.id = l.child
    WHERE e.how <> 'done' AND l.resolved = 0 AND +c.status = 'waiting' AND c.allow_failure = 0
    UNION
    SELECT l.child, l.pos, l.parent, 'cancelled'
    FROM doomed AS d
    JOIN job_links AS l ON l.parent = d.id
    JOIN jobs AS c ON c.id = l.child
    WHERE l.resolved = 0 AND +c.status = 'waiting' AND c.allow_failure = 0
)
UPDATE jobs
SET status = 'cancelled',
    waiting_on = 0,
    finished_at = :now,
    failure_reason = 'dependency_failed',
    last_error = d.error,
    errors = json_insert(CASE WHEN json_valid(jobs.errors) THEN jobs.errors ELSE '[]' END,
                         '$[#]', json_object('attempt', jobs.attempt, 'error', d.error,
                                             'reason', 'dependency_failed', 'at', :now,
                                             'owner', NULL))
FROM (SELECT id, min(pos),
             'dependency_failed: job ' || parent
             || CASE how WHEN 'purged' THEN ' was purged' ELSE ' ended ' || how END AS error
      FROM doomed GROUP BY id) AS d
WHERE jobs.id = d.id AND +jobs.status = 'waiting'
RETURNING id

-- name: release_children
-- Step 2: every waiting child of the jobs that ended (:ids, a JSON array: the ended jobs and
-- the ones step 1 cancelled) counts its links not resolved yet, each one a parent resolved in
-- its favour (done, or allow_failure: the children step 1 doomed are no longer waiting), and
-- leaves waiting when none is left: pending, due at max(run_at, now) (a job enqueued with a
-- later run_at still waits for it). A counter, not a count of the child's links: a callback
-- over 10,000 parents pays O(1) per parent's end. RETURNING tells Python to wake workers.
UPDATE jobs
SET waiting_on = max(jobs.waiting_on - r.n, 0),
    status = CASE WHEN jobs.waiting_on - r.n > 0 THEN 'waiting' ELSE 'pending' END,
    run_at = CASE WHEN jobs.waiting_on - r.n > 0 THEN jobs.run_at
                  ELSE max(jobs.run_at, :now) END
FROM (SELECT l.child AS child, count(*) AS n
      FROM job_links AS l
      WHERE l.parent IN (SELECT value FROM json_each(:ids)) AND l.resolved = 0
      GROUP BY l.child) AS r
WHERE jobs.id = r.child AND +jobs.status = 'waiting'
RETURNING status

-- name: resolve_links
-- Step 3: the links of those jobs are resolved, whatever became of their children (a child no
-- longer waiting is not changed, its link just resolves): each link counts once, so a replayed
-- or stale finish (fenced, it never gets here), or a retried dead letter ending again, finds
-- nothing left to resolve. Through job_links_parent.
UPDATE job_links SET resolved = 1
WHERE parent IN (SELECT value FROM json_each(:ids)) AND resolved = 0

-- name: any_link
-- Whether the file has any link (one probe of job_links' first page), read in prune's write
-- transaction: links are deleted only with their child, so without any no job has a parent,
-- and prune runs the statement it ran before workflows (queries.sql, prune vs prune_linked).
SELECT EXISTS (SELECT 1 FROM job_links)

-- name: unlink_children
-- Jobs deleted by prune or purge (:ids, a JSON array) lose the links where they are the child
-- (their parents' children lists drop them); links where they are the parent stay, so a child
-- still lists a parent deleted before it. Primary-key range probes.
DELETE FROM job_links WHERE child IN (SELECT value FROM json_each(:ids))

-- name: get_jobs
-- The jobs with these ids (:ids, a JSON array without duplicates), one primary-key probe per
-- id, in one round trip; Python puts them in the order asked.
SELECT id, task, queue, payload, status, priority, run_at, attempt, max_attempts, failures,
       stall_count, max_stalls, interruptions, locked_by, lease_until, created_at, started_at,
       finished_at, last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors, lease_token, uid, limit_key, snoozes
FROM jobs WHERE id IN (SELECT value FROM json_each(:ids))

-- name: job_links
-- A job's counter, flag, parents ([pos, parent] pairs: Python orders them by pos) and children
-- in ONE statement, so the four come from the same snapshot of the file. The parents are the
-- child's primary-key range, the children a range of job_links_parent. No row: unknown job.
SELECT waiting_on, allow_failure,
       (SELECT json_group_array(json_array(pos, parent)) FROM job_links WHERE child = :id),
       (SELECT json_group_array(child) FROM job_links WHERE parent = :id)
FROM jobs WHERE id = :id
