-- Named queries of the SQLite store. Every write runs inside ``BEGIN IMMEDIATE`` (the write lock
-- is taken up front, so a transaction never has to upgrade a read lock and deadlock on it).
-- ``:now`` is always bound: the Python side passes the caller's explicit time or the value of
-- ``clock``, read inside the same transaction. Batches travel as one JSON parameter expanded with
-- ``json_each`` so the SQL text is fixed and the prepared statement is reused.
-- Job rows are always selected with the column list of ``JobRecord``, in field order, so Python
-- turns a row into a Job positionally.

-- name: clock
-- The store's clock in epoch seconds: julianday('now') is SQLite's own time, so every process on
-- the machine judges leases by the same clock.
SELECT (julianday('now') - 2440587.5) * 86400.0

-- name: schema_tables
-- Which of tether's tables exist; check_schema compares against the full set.
SELECT name FROM sqlite_master
WHERE type = 'table' AND name IN ('jobs', 'workers', 'leaders', 'schema_version', 'requests',
               'schedules', 'flow_starts', 'job_links')

-- name: schema_version_exists
-- migrate reads the version first (inside its write lock) to pick the steps; a fresh file has
-- no schema_version table yet.
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'

-- name: schema_version
-- The newest applied schema version (NULL on an empty table).
SELECT max(version) FROM schema_version

-- name: schema_version_insert
-- Record a version once; OR IGNORE keeps concurrent migrations idempotent.
INSERT OR IGNORE INTO schema_version (version, applied_at) VALUES (:version, :now)

-- name: enqueue_find_unique
-- A live job holding the key (a waiting job is live: schema_v7.sql); a point lookup through
-- the partial unique index jobs_unique, whose WHERE term this repeats.
SELECT id FROM jobs
WHERE unique_key = :unique_key
  AND (status = 'waiting' OR status = 'pending' OR status = 'running')

-- name: request_find
-- A request id seen within the last 24 h: the call is a replay (its reply was lost) and is
-- answered from the record instead of being applied again.
SELECT reply FROM requests WHERE kind = :kind AND id = :request_id AND created_at > :now - 86400

-- name: request_insert
-- Written in the transaction of the call's effect, so both commit or neither. OR REPLACE: a
-- record older than 24 h with the same id (not yet pruned) is taken over.
INSERT OR REPLACE INTO requests (kind, id, reply, created_at)
VALUES (:kind, :request_id, :reply, :now)

-- name: requests_oldest
-- housekeeping's cheap test (one probe of requests_age) before it takes the write lock.
SELECT min(created_at) FROM requests

-- name: requests_prune
-- Records older than 24 h, oldest first through requests_age, a bounded batch per call.
DELETE FROM requests WHERE (kind, id) IN (
    SELECT kind, id FROM requests WHERE created_at < :cutoff ORDER BY created_at LIMIT :limit
)

-- name: enqueue_insert
-- One new pending job. Run per job inside the batch's single transaction so the id of each
-- input is known (lastrowid) and a unique_key inserted earlier in the batch is seen by
-- enqueue_find_unique for the later ones. The due time is computed here (run_at, else store now
-- + delay) so that Python has nothing to compute while the write lock is held. uid: 128 random
-- bits drawn by SQLite itself (no Python work, no extra parameter), never reused, unlike the id
-- (a restored backup hands ids out again): the dedup key's part that never names two jobs.
-- limit_key (issue #19) is stored as given (NULL: no key).
INSERT INTO jobs (task, queue, payload, status, priority, run_at, max_attempts, max_stalls,
                  unique_key, created_at, uid, limit_key)
VALUES (:task, :queue, :payload, 'pending', :priority, coalesce(:run_at, :now + :delay),
        :max_attempts, :max_stalls, :unique_key, :now, lower(hex(randomblob(16))), :limit_key)

-- name: enqueue_insert_many
-- enqueue_insert for a batch of jobs without unique_key and without parents (nothing to look
-- up between two inserts), run by executemany from tuples: ?1 task, ?2 queue, ?3 payload,
-- ?4 priority, ?5 run_at, ?6 delay, ?7 max_attempts, ?8 max_stalls, ?9 limit_key, ?10 now.
-- Named parameters cost a dictionary lookup per parameter and job (issue #23: a batch of
-- 10,000 ran at 0.4 x a bare executemany). The ids need no lastrowid per job: under the write
-- lock AUTOINCREMENT hands out consecutive ids, so Python reads the last one (last_insert_id).
INSERT INTO jobs (task, queue, payload, status, priority, run_at, max_attempts, max_stalls,
                  created_at, uid, limit_key)
VALUES (?1, ?2, ?3, 'pending', ?4, coalesce(?5, ?10 + ?6), ?7, ?8, ?10,
        lower(hex(randomblob(16))), ?9)

-- name: enqueue_insert_shared
-- enqueue_insert_many for a batch whose jobs differ only in their payloads (what one
-- enqueue_many call makes): one statement, the payloads as one JSON array of strings (?3),
-- every other value bound once. executemany bound and stepped ten parameters per job, three
-- times a bare three-column executemany's work per job (issue #23, callgrind). ORDER BY
-- j.key: the rows go in in input order, so the ids are the consecutive run that ends at
-- last_insert_id, in input order, as after enqueue_insert_many.
INSERT INTO jobs (task, queue, payload, status, priority, run_at, max_attempts, max_stalls,
                  created_at, uid, limit_key)
SELECT ?1, ?2, j.value, 'pending', ?4, coalesce(?5, ?10 + ?6), ?7, ?8, ?10,
       lower(hex(randomblob(16))), ?9
FROM json_each(?3) j
ORDER BY j.key
-- name: enqueue_one
-- One job without unique_key or parents (a single enqueue, issue #23): enqueue_insert with
-- positional parameters (?1 task ... ?9 limit_key as in enqueue_insert_many, ?10 now or NULL)
-- and the store's clock read inside the statement (the clock query's expression), not in a
-- statement of its own: a lone enqueue was six statements where the bare INSERT is one.
INSERT INTO jobs (task, queue, payload, status, priority, run_at, max_attempts, max_stalls,
                  created_at, uid, limit_key)
SELECT ?1, ?2, ?3, 'pending', ?4, coalesce(?5, c.now + ?6), ?7, ?8, c.now,
       lower(hex(randomblob(16))), ?9
FROM (SELECT coalesce(?10, (julianday('now') - 2440587.5) * 86400.0) AS now) AS c

-- name: request_put_one
-- enqueue_one's request record, written after its job in the same transaction: one upsert
-- instead of request_find + request_insert. A record of this id younger than 24 h (the call
-- is a replay: its reply was lost) is left as it is and the upsert changes no row, which
-- tells the caller to roll its job back and answer from the record (request_reply); an
-- older one is taken over, as request_insert's OR REPLACE does. ?3: now or NULL (the clock).
INSERT INTO requests (kind, id, reply, created_at)
VALUES ('enqueue', ?1, ?2, coalesce(?3, (julianday('now') - 2440587.5) * 86400.0))
ON CONFLICT (kind, id) DO UPDATE SET reply = excluded.reply, created_at = excluded.created_at
WHERE requests.created_at <= excluded.created_at - 86400

-- name: request_reply
-- The reply recorded for an enqueue's request id (request_put_one found it fresh).
SELECT reply FROM requests WHERE kind = 'enqueue' AND id = ?1

-- name: last_insert_id
-- The id of the last row this connection inserted (after enqueue_insert_many, in its
-- transaction).
SELECT last_insert_rowid()

-- name: claim
-- The claim IS the lease grant: one UPDATE moves the chosen pending rows to running and sets
-- owner, lease, attempt + 1 and started_at together, so no row is ever running without a lease.
-- The write lock (BEGIN IMMEDIATE) means no other claimer can pick the same rows.
-- Candidate choice is top-N per queue, then top-N overall: for each queue of :queues (a JSON
-- array, deduplicated by Python) the correlated subquery walks the partial index jobs_claim in
-- (priority, run_at, id) order and stops after :limit due rows, so a claim costs
-- O(queues * limit) however large the backlog is; only those few candidates get sorted.
-- lease_token = nonce:id, where :nonce is 128 random bits drawn by Python per claim call (or the
-- caller's request id): the fence that an id reused after data loss cannot match.
-- RETURNING gives only what the caller cannot know (issue #23): status, locked_by, lease_until,
-- started_at, cancel_requested and lease_token are the values set here from the parameters,
-- and Python fills them in (rows.claimed_job); every returned column costs SQLite a copy into
-- RETURNING's buffer and Python a conversion, per job. The columns are in JobRecord's order
-- with those six left out. RETURNING order is unspecified: Python sorts.
-- OR FAIL, not the default ABORT: ABORT keeps a statement journal (the original of every page
-- the statement changes, to undo the statement alone) for a write of many rows; the claim runs
-- in its own transaction, which any error rolls back whole (Connections.write), so the undo is
-- never needed (as in flow.sql's flow_claim).
UPDATE OR FAIL jobs
SET status = 'running',
    locked_by = :owner,
    lease_until = :now + :lease_ttl,
    attempt = attempt + 1,
    started_at = :now,
    cancel_requested = 0,
    lease_token = :nonce || ':' || id
WHERE id IN (
    SELECT j.id
    FROM json_each(:queues) AS q
    JOIN jobs AS j ON j.id IN (
        SELECT id FROM jobs INDEXED BY jobs_claim
        WHERE queue = q.value AND status = 'pending' AND run_at <= :now
        ORDER BY priority, run_at, id
        LIMIT :limit
    )
    ORDER BY j.priority, j.run_at, j.id
    LIMIT :limit
)
RETURNING id, task, queue, payload, priority, run_at, attempt, max_attempts, failures,
          stall_count, max_stalls, interruptions, created_at, finished_at, last_error,
          failure_reason, result, checkpoint, progress, unique_key, errors, uid, limit_key,
          snoozes

-- name: claim_replayed
-- A claim repeated with the same request id (its reply was lost): the jobs it claimed that are
-- still running under this owner, found by their token (nonce:id). Nothing more is claimed.
-- Scans only the running jobs (partial index jobs_lease); replays are rare.
SELECT id, task, queue, payload, status, priority, run_at, attempt, max_attempts, failures,
       stall_count, max_stalls, interruptions, locked_by, lease_until, created_at, started_at,
       finished_at, last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors, lease_token, uid, limit_key, snoozes
FROM jobs INDEXED BY jobs_lease
WHERE status = 'running' AND locked_by = :owner
  AND lease_token = :nonce || ':' || id

-- name: heartbeat
-- Renew every lease of the batch in one statement. :leases is a JSON array of
-- [id, attempt, owner, token]; each row is fenced by (id, attempt, owner, token) and status =
-- 'running', so a lease that was reaped, re-claimed or finished is simply not returned (Python
-- reports it lost).
-- cancel_requested comes back so the holder learns about a cancel in the same round trip.
-- The unary + on jobs.status keeps the planner off any status index: the batch (json_each) must
-- drive the loop with a primary-key probe per lease, never a scan of all running jobs.
UPDATE jobs
SET lease_until = :now + :lease_ttl
FROM (
    SELECT json_extract(value, '$[0]') AS id,
           json_extract(value, '$[1]') AS attempt,
           json_extract(value, '$[2]') AS owner,
           json_extract(value, '$[3]') AS token
    FROM json_each(:leases)
) AS lease
WHERE jobs.id = lease.id
  AND jobs.attempt = lease.attempt
  AND jobs.locked_by = lease.owner
  AND jobs.lease_token = lease.token
  AND +jobs.status = 'running'
RETURNING id, attempt, locked_by, lease_token, cancel_requested

-- name: touch_worker
-- The worker row's last_seen, in the heartbeat's transaction.
UPDATE workers SET last_seen = :now WHERE id = :owner

-- name: finish
-- Apply one outcome; Python runs it once per outcome of the batch with executemany (one
-- prepared statement, positional parameters bound from tuples: no JSON to build in Python or
-- to unpack here, which cost a draining worker half its finish, issue #23):
-- ?1 id, ?2 attempt, ?3 owner, ?4 token, ?5 kind, ?6 result, ?7 error (already cleaned),
-- ?8 reason (defaulted by Python), ?9 retry_delay, ?10 now. The WHERE is the fence (id,
-- attempt, owner, token, running); a stale outcome changes nothing. The next status, by the
-- counting rules of base.py, is written out where it is used (SET reads the old row):
--   done -> done;  cancelled -> cancelled;  dead -> failed
--   error / released / stalled / snoozed with cancel_requested -> cancelled (a cancel sticks)
--   released  -> pending, interruptions + 1 (neither a failure nor a stall)
--   snoozed   -> pending at now + retry_delay, snoozes + 1 (not a failure, not an attempt that
--                counts); its error record is written (Python defaults the text to 'snoozed')
--                but last_error is left as it was
--   stalled   -> stall_count + 1; pending while stall_count + 1 < max_stalls and
--                failures + stall_count + 1 < max_attempts (the reap rule), else failed
--   error     -> pending while failures + 1 + stall_count < max_attempts, else failed
-- A retried error moves run_at to now + retry_delay; a released job keeps its run_at (due at
-- once, in its place in line) unless it asks for a delay; a stalled job always keeps it.
-- lease_token is kept and the holder recorded in outcome_owner: a replayed finish recognises
-- its own applied outcome by both (finish_replayed). The error record: exactly attempt, error,
-- reason, at, owner; a non-JSON errors column (written by another program) restarts as []
-- rather than failing the write. The unary + keeps the planner on the primary-key probe.
-- OR FAIL: no statement journal (see claim); the transaction is undone whole on any error.
UPDATE OR FAIL jobs
SET status = CASE
        WHEN ?5 = 'done' THEN 'done'
        WHEN ?5 = 'cancelled' THEN 'cancelled'
        WHEN ?5 = 'dead' THEN 'failed'
        WHEN cancel_requested = 1 THEN 'cancelled'
        WHEN ?5 = 'released' OR ?5 = 'snoozed' THEN 'pending'
        WHEN ?5 = 'stalled' THEN
            CASE WHEN stall_count + 1 < max_stalls AND failures + stall_count + 1 < max_attempts
                 THEN 'pending' ELSE 'failed' END
        WHEN failures + 1 + stall_count < max_attempts THEN 'pending'
        ELSE 'failed' END,
    failures = failures + (?5 = 'error' OR ?5 = 'dead'),
    interruptions = interruptions + (?5 = 'released'),
    stall_count = stall_count + (?5 = 'stalled'),
    snoozes = snoozes + (?5 = 'snoozed'),
    run_at = CASE WHEN (?5 = 'error' AND cancel_requested = 0
                        AND failures + 1 + stall_count < max_attempts)
                    OR ((?5 = 'snoozed' OR (?5 = 'released' AND ?9 > 0))
                        AND cancel_requested = 0)
                  THEN ?10 + ?9 ELSE run_at END,
    result = CASE ?5 WHEN 'done' THEN ?6 ELSE result END,
    last_error = CASE ?5 WHEN 'snoozed' THEN last_error ELSE coalesce(?7, last_error) END,
    errors = CASE WHEN ?7 IS NULL THEN errors
                  ELSE json_insert(CASE WHEN json_valid(errors) THEN errors ELSE '[]' END,
                                   '$[#]', json_object('attempt', attempt, 'error', ?7,
                                                       'reason', ?8, 'at', ?10,
                                                       'owner', locked_by)) END,
    failure_reason = CASE
        WHEN ?5 = 'dead'
          OR (?5 = 'stalled' AND cancel_requested = 0
              AND NOT (stall_count + 1 < max_stalls
                       AND failures + stall_count + 1 < max_attempts))
          OR (?5 = 'error' AND cancel_requested = 0
              AND NOT (failures + 1 + stall_count < max_attempts))
        THEN ?8 ELSE failure_reason END,
    finished_at = CASE
        WHEN ?5 = 'done' OR ?5 = 'cancelled' OR ?5 = 'dead' OR cancel_requested = 1
          OR (?5 = 'stalled' AND NOT (stall_count + 1 < max_stalls
                                      AND failures + stall_count + 1 < max_attempts))
          OR (?5 = 'error' AND NOT (failures + 1 + stall_count < max_attempts))
        THEN ?10 ELSE finished_at END,
    outcome_owner = locked_by,
    locked_by = NULL,
    lease_until = NULL
WHERE id = ?1 AND attempt = ?2 AND locked_by = ?3 AND lease_token = ?4 AND +status = 'running'

-- name: finish_done
-- The finish statement (above) for a done outcome, which is most of them: same parameters,
-- same fence, same writes, with every branch that a done outcome cannot take left out (it ends
-- done whatever the counters and the cancel flag say). ?5 = 'done' keeps it to those. Measured
-- (callgrind, a store-level drain): 178.5k -> 175.1k instructions per claimed+finished job.
UPDATE OR FAIL jobs
SET status = 'done',
    result = ?6,
    last_error = coalesce(?7, last_error),
    errors = CASE WHEN ?7 IS NULL THEN errors
                  ELSE json_insert(CASE WHEN json_valid(errors) THEN errors ELSE '[]' END,
                                   '$[#]', json_object('attempt', attempt, 'error', ?7,
                                                       'reason', ?8, 'at', ?10,
                                                       'owner', locked_by)) END,
    finished_at = ?10,
    outcome_owner = locked_by,
    locked_by = NULL,
    lease_until = NULL
WHERE id = ?1 AND attempt = ?2 AND locked_by = ?3 AND lease_token = ?4 AND +status = 'running'
  AND ?5 = 'done'

-- name: finish_ended
-- After a finish, in its transaction, when the file has links (links.sql, any_link): the jobs
-- of the applied outcomes (:ids, a JSON array) that ended (any status but pending) and have
-- children, whose links Python then resolves in this transaction (links.py). Primary-key
-- probes; a file without workflows never runs it.
SELECT id, status FROM jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND has_children = 1 AND status <> 'pending'

-- name: finish_replayed
-- Outcomes the fence turned down that this very lease had already applied: the row left
-- running (same attempt) and still carries the lease's token, which only the holder's own
-- finish leaves behind (reap and dead-letter retry clear it, a new claim overwrites it), in a
-- status that outcome's kind leads to. A finish whose reply was lost and that is sent again is
-- accepted, not reported rejected; a different late outcome (error after done) stays rejected.
-- The holder too: outcome_owner is the owner whose finish applied it (schema_v8.sql), so the
-- same token sent by another owner is no replay and stays rejected.
-- :leases is a JSON array of [id, attempt, owner, token, kind]; error and stalled outcomes may
-- have left the job pending, failed or cancelled.
SELECT j.id, j.attempt, j.outcome_owner, j.lease_token, x.kind
FROM (
    SELECT json_extract(value, '$[0]') AS id,
           json_extract(value, '$[1]') AS attempt,
           json_extract(value, '$[2]') AS owner,
           json_extract(value, '$[3]') AS token,
           json_extract(value, '$[4]') AS kind
    FROM json_each(:leases)
) AS x
JOIN jobs AS j ON j.id = x.id AND j.attempt = x.attempt AND j.lease_token = x.token
              AND j.outcome_owner = x.owner
WHERE CASE x.kind
          WHEN 'done' THEN j.status = 'done'
          WHEN 'dead' THEN j.status = 'failed'
          WHEN 'cancelled' THEN j.status = 'cancelled'
          WHEN 'released' THEN j.status IN ('pending', 'cancelled')
          ELSE j.status IN ('pending', 'failed', 'cancelled')
      END

-- name: reap
-- The reaper's single set-based write: every expired lease, oldest first, goes through the stall
-- rule at once; no ids are read first and written later. A requested cancel sticks: such a job
-- ends cancelled. Otherwise a stall retries while stall_count + 1 < max_stalls and
-- failures + stall_count + 1 < max_attempts, else failed/stalled. run_at is left alone: the job
-- was due when claimed, so it is due at once and keeps its place in line (run_at = now would
-- send recovered jobs to the back of a backlog). The token is cleared: the lost holder's
-- replayed finish must not pass for an applied one. RETURNING only sees new values, so the lost
-- owner travels out through the error record appended here (SET expressions read the old row),
-- which also keeps who lost the lease in the job's history. A non-JSON errors column (written
-- by another program) restarts as [] instead of failing every reap. has_children: a job that
-- ended here with children has its links resolved in this transaction (links.sql).
UPDATE jobs
SET stall_count = stall_count + 1,
    status = CASE WHEN cancel_requested = 1 THEN 'cancelled'
                  WHEN stall_count + 1 < max_stalls
                   AND failures + stall_count + 1 < max_attempts
                  THEN 'pending' ELSE 'failed' END,
    failure_reason = CASE WHEN cancel_requested = 1 THEN failure_reason
                          WHEN stall_count + 1 < max_stalls
                           AND failures + stall_count + 1 < max_attempts
                          THEN failure_reason ELSE 'stalled' END,
    finished_at = CASE WHEN cancel_requested = 0
                        AND stall_count + 1 < max_stalls
                        AND failures + stall_count + 1 < max_attempts
                       THEN finished_at ELSE :now END,
    last_error = :error,
    errors = json_insert(CASE WHEN json_valid(errors) THEN errors ELSE '[]' END, '$[#]',
                         json_object('attempt', attempt, 'error', :error, 'reason', 'stalled',
                                     'at', :now, 'owner', locked_by)),
    locked_by = NULL,
    lease_until = NULL,
    lease_token = NULL
WHERE id IN (SELECT id FROM jobs
             WHERE status = 'running' AND lease_until < :cutoff
             ORDER BY lease_until
             LIMIT :limit)
RETURNING id, attempt, json_extract(errors, '$[#-1].owner'), status, stall_count, has_children

-- name: next_lease_expiry
-- min() over the partial index jobs_lease: one index probe.
SELECT min(lease_until) FROM jobs WHERE status = 'running'

-- name: cancel
-- pending or waiting -> cancelled at once (no failure reason: an operator's decision; a
-- waiting job stops waiting, waiting_on 0); running -> cancel_requested (the holder learns it
-- at its next heartbeat and reports the outcome itself). Terminal rows are not touched. One
-- statement so the status cannot change between the test and the write. has_children: a job
-- cancelled here cancels its waiting children in this transaction (links.sql).
UPDATE jobs
SET status = CASE WHEN status IN ('pending', 'waiting') THEN 'cancelled' ELSE status END,
    finished_at = CASE WHEN status IN ('pending', 'waiting') THEN :now ELSE finished_at END,
    waiting_on = 0,
    cancel_requested = CASE status WHEN 'running' THEN 1 ELSE cancel_requested END
WHERE id = :id AND status IN ('waiting', 'pending', 'running')
RETURNING status, has_children

-- name: cancel_requested_of
-- wait_for_signal (issue 22): the running jobs of one worker whose cancel was requested; read
-- only when another connection committed (data_version moved). The partial jobs_lease index
-- keeps it to the running rows.
SELECT id FROM jobs
WHERE status = 'running' AND locked_by = :owner AND cancel_requested = 1

-- name: job_exists
-- Tells "finished" from "unknown id" after cancel matched nothing.
SELECT 1 FROM jobs WHERE id = :id

-- name: retry_failed
-- Dead-letter retry: failed -> pending, due now, budgets reset, cancel request and token
-- cleared; attempt stays (it is the fence). :ids is a JSON array, or NULL for every failed job.
-- One rule for unique keys, the same on every store: a job whose unique_key is held by a live
-- (waiting/pending/running) job stays failed and is reported (retry_conflicts, run next in the same
-- transaction); of several failed jobs with one free key, the lowest id is retried. The
-- conditions hold whether SQLite evaluates them before or during the update (a row retried
-- earlier in this statement is live for the NOT EXISTS that follows it). status = 'failed'
-- lets SQLite use the partial index jobs_prune to find the failed rows (it implies the
-- index's WHERE); the live test repeats jobs_unique's WHERE term, so that it is a probe.
UPDATE jobs
SET status = 'pending', run_at = :now, failures = 0, stall_count = 0,
    failure_reason = NULL, finished_at = NULL, cancel_requested = 0, lease_token = NULL
WHERE status = 'failed'
  AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))
  AND (unique_key IS NULL OR (
      NOT EXISTS (SELECT 1 FROM jobs AS live
                  WHERE live.unique_key = jobs.unique_key
                    AND (live.status = 'waiting' OR live.status = 'pending'
                         OR live.status = 'running'))
      AND NOT EXISTS (SELECT 1 FROM jobs AS twin
                      WHERE twin.unique_key = jobs.unique_key AND twin.id < jobs.id
                        AND twin.status = 'failed'
                        AND (:ids IS NULL OR twin.id IN (SELECT value FROM json_each(:ids))))))

-- name: retry_conflicts
-- Right after retry_failed, in its transaction: the failed jobs of the request still failed
-- because their key is held by a live job. Ascending ids.
SELECT f.id FROM jobs AS f
WHERE f.status = 'failed'
  AND (:ids IS NULL OR f.id IN (SELECT value FROM json_each(:ids)))
  AND f.unique_key IS NOT NULL
  AND EXISTS (SELECT 1 FROM jobs AS live
              WHERE live.unique_key = f.unique_key
                AND (live.status = 'waiting' OR live.status = 'pending'
                     OR live.status = 'running'))
ORDER BY f.id

-- name: save_checkpoint
-- Fenced by the lease (id, attempt, owner, token) and status = 'running': a stale holder
-- changes nothing.
UPDATE jobs SET checkpoint = :value
WHERE id = :id AND attempt = :attempt AND locked_by = :owner AND lease_token = :token
  AND status = 'running'

-- name: set_progress
-- Fenced like save_checkpoint.
UPDATE jobs SET progress = :value
WHERE id = :id AND attempt = :attempt AND locked_by = :owner AND lease_token = :token
  AND status = 'running'

-- name: prune
-- Bounded delete of old terminal jobs through jobs_prune (the OR term repeats that partial
-- index's WHERE so SQLite can use it); LIMIT in a subquery because SQLite's DELETE ... LIMIT
-- needs a compile-time option. A parent is kept while a child is not terminal (the child will
-- read its result: invariant 6); only a job with has_children pays for that look at its links.
-- The statement of a file without links (links.sql, any_link): no job has a parent to unlink.
DELETE FROM jobs WHERE id IN (
    SELECT id FROM jobs
    WHERE status = :status AND (status = 'done' OR status = 'failed' OR status = 'cancelled')
      AND finished_at < :cutoff
      AND NOT (has_children = 1 AND EXISTS (
          SELECT 1 FROM job_links AS l JOIN jobs AS c ON c.id = l.child
          WHERE l.parent = jobs.id AND +c.status NOT IN ('done', 'failed', 'cancelled')))
    ORDER BY finished_at
    LIMIT :limit
)

-- name: prune_linked
-- prune when the file has links: the same delete, RETURNING the ids, whose links as a child
-- are dropped in the same transaction (links.sql, unlink_children). A separate statement
-- because RETURNING has a cost of its own (SQLite buffers the rows; measured: 2.2 -> 3.8 us per
-- pruned job) that a file without workflows should not pay.
DELETE FROM jobs WHERE id IN (
    SELECT id FROM jobs
    WHERE status = :status AND (status = 'done' OR status = 'failed' OR status = 'cancelled')
      AND finished_at < :cutoff
      AND NOT (has_children = 1 AND EXISTS (
          SELECT 1 FROM job_links AS l JOIN jobs AS c ON c.id = l.child
          WHERE l.parent = jobs.id AND +c.status NOT IN ('done', 'failed', 'cancelled')))
    ORDER BY finished_at
    LIMIT :limit
)
RETURNING id

-- name: leader_acquire
-- Insert-if-absent, or take over a released/expired lease, bumping term (the fence of the
-- leader). The upsert's WHERE makes it a no-op (no row returned) while someone else holds it.
-- The current, unexpired holder gets its leadership back unchanged (same term and expiry): an
-- acquire repeated after its reply was lost must leave an acting leader, not a lost one.
INSERT INTO leaders (name, holder, term, expires_at)
VALUES (:name, :holder, 1, :now + :ttl)
ON CONFLICT (name) DO UPDATE
SET holder = excluded.holder,
    term = CASE WHEN leaders.holder = excluded.holder AND leaders.expires_at > :now
                THEN leaders.term ELSE leaders.term + 1 END,
    expires_at = CASE WHEN leaders.holder = excluded.holder AND leaders.expires_at > :now
                      THEN leaders.expires_at ELSE excluded.expires_at END
WHERE leaders.holder IS NULL OR leaders.expires_at <= :now OR leaders.holder = excluded.holder
RETURNING name, holder, term, expires_at

-- name: leader_renew
-- Extend only while (holder, term) still hold an unexpired lease.
UPDATE leaders SET expires_at = :now + :ttl
WHERE name = :name AND holder = :holder AND term = :term AND expires_at > :now
RETURNING name, holder, term, expires_at

-- name: leader_release
-- Fenced by (holder, term): a newer acquisition bumped term, so a stale holder cannot release
-- it. The row stays (holder cleared) so term keeps growing.
UPDATE leaders SET holder = NULL, expires_at = 0
WHERE name = :name AND holder = :holder AND term = :term

-- name: leader_get
-- A plain read of who holds a leadership (expired or not); a released row has no holder.
SELECT name, holder, term, expires_at FROM leaders WHERE name = :name AND holder IS NOT NULL

-- name: get_job
-- Point lookup by primary key.
SELECT id, task, queue, payload, status, priority, run_at, attempt, max_attempts, failures,
       stall_count, max_stalls, interruptions, locked_by, lease_until, created_at, started_at,
       finished_at, last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors, lease_token, uid, limit_key, snoozes
FROM jobs WHERE id = :id

-- name: list_jobs
-- Keyset pagination: a range scan of the primary key from after_id; optional filters are
-- written as (:x IS NULL OR col = :x) so one fixed statement serves every combination.
SELECT id, task, queue, payload, status, priority, run_at, attempt, max_attempts, failures,
       stall_count, max_stalls, interruptions, locked_by, lease_until, created_at, started_at,
       finished_at, last_error, failure_reason, result, checkpoint, progress, unique_key,
       cancel_requested, errors, lease_token, uid, limit_key, snoozes
FROM jobs
WHERE id > :after_id
  AND (:status IS NULL OR status = :status)
  AND (:queue IS NULL OR queue = :queue)
ORDER BY id
LIMIT :limit

-- name: counts
-- Jobs per (queue, status); for stats, not a hot path.
SELECT queue, status, count(*) FROM jobs GROUP BY queue, status ORDER BY queue, status

-- name: register_worker
-- Insert a worker incarnation, or refresh it (started_at is kept on refresh).
INSERT INTO workers (id, host, pid, queues, concurrency, started_at, last_seen)
VALUES (:id, :host, :pid, :queues, :concurrency, :now, :now)
ON CONFLICT (id) DO UPDATE
SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    concurrency = excluded.concurrency, last_seen = excluded.last_seen

-- name: unregister_worker
-- A worker leaving cleanly.
DELETE FROM workers WHERE id = :id

-- name: list_workers
-- All worker rows, oldest first.
SELECT id, host, pid, queues, concurrency, started_at, last_seen
FROM workers ORDER BY started_at, id
