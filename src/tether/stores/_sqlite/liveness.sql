-- Death detection (issue #22): the reap of a dead owner's jobs. The token itself is a flock
-- on a file beside the database (liveness.py), not a row: only the kernel can say that the
-- process holding it is gone.

-- name: reap_dead
-- The reaper's write (queries.sql, "reap") with the jobs selected by owner instead of by
-- expiry: the caller found these owners' tokens released, so their running jobs come back now,
-- whatever their leases say. Everything else is the reap's, for the same reasons: the stall
-- rule, a requested cancel sticks, run_at kept (the job keeps its place in line), the token
-- cleared (a late finish of the dead attempt is fenced out), the old owner carried out through
-- the error record. The subquery can walk the partial index jobs_lease (running rows only),
-- so the cost is the number of running jobs, not the table; status = 'running' and locked_by are
-- the fence: a job the owner finished, or that another worker re-claimed, is not touched.
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
             WHERE status = 'running'
               AND locked_by IN (SELECT value FROM json_each(:owners))
             ORDER BY id
             LIMIT :limit)
RETURNING id, attempt, json_extract(errors, '$[#-1].owner'), status, stall_count, has_children

