-- finish(batch): apply every outcome of a batch in one script, each fenced on its own by
-- (id, attempt, owner, token, status running): a stale outcome next to the valid one for the
-- same job is rejected and the valid one applied, in batch order.
-- Replays: an outcome that was applied already (row no longer running, same attempt, owner
-- and token, and the same outcome: finish keeps the token and a digest of the applied
-- outcome in lease_outcome for this) is neither applied again nor reported rejected. That
-- covers a finish whose reply was lost and that is sent again, and the exact same outcome
-- twice in one batch; any other outcome of a claim that already ended is rejected.
-- Counting rules are those of tether.stores._contract (shared with reap.lua):
--   done / cancelled -> terminal; released -> pending, interruptions + 1, run_at unchanged
--   (due at once, first in line) unless retry_delay > 0 (then now + retry_delay);
--   error -> failures + 1, pending at now + retry_delay while failures + stall_count <
--   max_attempts, else failed; dead -> failures + 1 and failed at once;
--   stalled -> stall_count + 1, pending with run_at unchanged while stall_count < max_stalls
--   and failures + stall_count < max_attempts (the rule of reap.lua), else failed.
--   snoozed (issue 19) -> pending at now + retry_delay, snoozes + 1, nothing else counted;
--   its errors record (reason 'snoozed', the error text or 'snoozed') leaves last_error be.
--   A cancel request sticks: error, stalled, released and snoozed end the job 'cancelled' instead of
--   pending or failed-by-budget; done stays done, dead stays failed.
-- Error records carry the lease's owner and the reason (given, else by kind).
-- Workflows (invariant 6): a job that ends here (done, failed, cancelled) resolves its
-- waiting children at the end of this script (resolve_links, _lib.lua): released when it was
-- their last parent, or cancelled with their waiting descendants. Only the fenced outcome
-- that ends the job gets there: a replay or a stale outcome changes nothing, so resolves
-- nothing. A job without children (no 'waiters' field) pays nothing for it.
-- ARGV: P, now|'', then per outcome 11 fields:
--   id, attempt, owner, token, kind, has_result, result, has_error, error, reason|'',
--   retry_delay
-- The ids that ended (done, failed, cancelled; children cancelled with them too) are published
-- on P:done (announce, _lib.lua).
-- Returns the 1-based positions of rejected outcomes.
local now, now_s = clock(ARGV[2])
room()  -- at the memory limit, fail here before the first write (_lib.lua)
local rejected, woken = {}, {}
local DEFAULT_REASON = {error = 'error', dead = 'error', released = 'released',
  cancelled = 'cancelled', stalled = 'stalled'}
local n = 0
for i = 3, #ARGV, 11 do
  n = n + 1
  local id, attempt, owner, token, kind = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3],
    ARGV[i + 4]
  local digest = redis.sha1hex(table.concat({kind, ARGV[i + 5], ARGV[i + 6], ARGV[i + 7],
    ARGV[i + 8], ARGV[i + 9], ARGV[i + 10]}, '\n'))
  local v = fenced(id, attempt, owner, token)
  if not v then
    if not applied(id, attempt, owner, token, digest) then rejected[#rejected + 1] = n end
  else
    local k = jk(id)
    redis.call('HSET', k, 'lease_outcome', digest)
    -- kids: the 'waiters' flag (fenced's HMGET): children to resolve if the job ends here
    local q, prio, ukey, kids = v[4], v[5], v[10], v[14]
    local cancel = v[11] == '1'
    local reason = ARGV[i + 9]
    if reason == '' then reason = DEFAULT_REASON[kind] end
    if kind == 'snoozed' then
      -- a snooze is always on record (when and by whom it was put back) but is no error:
      -- reason fixed, text defaulted, last_error kept
      local text = ARGV[i + 8]
      if ARGV[i + 7] ~= '1' then text = 'snoozed' end
      add_error(id, attempt, text, 'snoozed', now_s, owner, true)
    elseif ARGV[i + 7] == '1' then
      add_error(id, attempt, ARGV[i + 8], reason, now_s, owner)
    end
    unlock(id)
    local delay = tonumber(ARGV[i + 10])
    if kind == 'done' then
      if ARGV[i + 5] == '1' then redis.call('HSET', k, 'result', ARGV[i + 6]) end
      terminate(id, q, 'running', 'done', now, now_s, ukey, kids)
    elseif kind == 'cancelled' then
      terminate(id, q, 'running', 'cancelled', now, now_s, ukey, kids)
    elseif kind == 'released' then
      redis.call('HINCRBY', k, 'interruptions', 1)
      if cancel then
        terminate(id, q, 'running', 'cancelled', now, now_s, ukey, kids)
      else
        local run_at = tonumber(v[12])
        if delay > 0 then
          run_at = now + delay
          redis.call('HSET', k, 'run_at', fmt(run_at))
        end
        redis.call('HSET', k, 'status', 'pending')
        move_idx(id, q, 'running', 'pending')
        add_pending(id, q, prio, run_at)
        woken[q] = true
      end
    elseif kind == 'snoozed' then
      -- counted apart (snoozes), so neither the failure budget nor tries is used
      redis.call('HINCRBY', k, 'snoozes', 1)
      if cancel then
        terminate(id, q, 'running', 'cancelled', now, now_s, ukey, kids)
      else
        -- due again after the handler's delay, on the store's clock
        local run_at = now + delay
        redis.call('HSET', k, 'status', 'pending', 'run_at', fmt(run_at))
        move_idx(id, q, 'running', 'pending')
        add_pending(id, q, prio, run_at)
        woken[q] = true
      end
    elseif kind == 'stalled' then
      local stalls = tonumber(v[7]) + 1
      redis.call('HSET', k, 'stall_count', stalls)
      if cancel then
        terminate(id, q, 'running', 'cancelled', now, now_s, ukey, kids)
      elseif stalls < tonumber(v[9]) and tonumber(v[6]) + stalls < tonumber(v[8]) then
        redis.call('HSET', k, 'status', 'pending')
        move_idx(id, q, 'running', 'pending')
        add_pending(id, q, prio, tonumber(v[12]))
        woken[q] = true
      else
        redis.call('HSET', k, 'failure_reason', reason)
        terminate(id, q, 'running', 'failed', now, now_s, ukey, kids)
      end
    else
      local failures = tonumber(v[6]) + 1
      redis.call('HSET', k, 'failures', failures)
      if kind == 'error' and cancel then
        terminate(id, q, 'running', 'cancelled', now, now_s, ukey, kids)
      elseif kind == 'error' and failures + tonumber(v[7]) < tonumber(v[8]) then
        local run_at = now + delay
        redis.call('HSET', k, 'status', 'pending', 'run_at', fmt(run_at))
        move_idx(id, q, 'running', 'pending')
        add_pending(id, q, prio, run_at)
        woken[q] = true
      else
        redis.call('HSET', k, 'failure_reason', reason or 'error')
        terminate(id, q, 'running', 'failed', now, now_s, ukey, kids)
      end
    end
  end
end
-- the children of the jobs that ended here move in this same script (invariant 6)
resolve_links(now, now_s, woken)
wake(woken)
announce()
return rejected
