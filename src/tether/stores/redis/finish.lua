-- finish(batch): apply every outcome of a batch in one script, each fenced by
-- (id, attempt, owner, status running); a stale outcome changes nothing and is reported.
-- Counting rules are those of tether.stores.base (shared with reap.lua):
--   done / cancelled -> terminal; released -> pending with run_at unchanged (due at once
--   and first in line again), interruptions + 1;
--   error -> failures + 1, pending at now + retry_delay while failures + stall_count <
--   max_attempts, else failed; dead -> failures + 1 and failed at once;
--   stalled -> stall_count + 1, pending with run_at unchanged while stall_count < max_stalls
--   and failures + stall_count < max_attempts (the rule of reap.lua), else failed.
-- ARGV: P, now|'', then per outcome 10 fields:
--   id, attempt, owner, kind, has_result, result, has_error, error, reason|'', retry_delay
-- Returns the 1-based positions of rejected outcomes.
local now, now_s = clock(ARGV[2])
local rejected, woken = {}, {}
local n = 0
for i = 3, #ARGV, 10 do
  n = n + 1
  local id, attempt, kind = ARGV[i], ARGV[i + 1], ARGV[i + 3]
  local v = fenced(id, attempt, ARGV[i + 2])
  if not v then
    rejected[#rejected + 1] = n
  else
    local k = jk(id)
    local q, prio, ukey = v[4], v[5], v[10]
    local reason = ARGV[i + 8]
    if reason == '' then reason = nil end
    if (kind == 'error' or kind == 'dead') and not reason then reason = 'error' end
    if kind == 'stalled' and not reason then reason = 'stalled' end
    if ARGV[i + 6] == '1' then add_error(id, attempt, ARGV[i + 7], reason, now_s) end
    unlock(id)
    if kind == 'done' then
      if ARGV[i + 4] == '1' then redis.call('HSET', k, 'result', ARGV[i + 5]) end
      terminate(id, q, 'running', 'done', now, now_s, ukey)
    elseif kind == 'cancelled' then
      terminate(id, q, 'running', 'cancelled', now, now_s, ukey)
    elseif kind == 'released' then
      redis.call('HINCRBY', k, 'interruptions', 1)
      redis.call('HSET', k, 'status', 'pending')
      move_idx(id, q, 'running', 'pending')
      add_pending(id, q, prio, tonumber(v[12]))
      woken[q] = true
    elseif kind == 'stalled' then
      local stalls = tonumber(v[7]) + 1
      redis.call('HSET', k, 'stall_count', stalls)
      if stalls < tonumber(v[9]) and tonumber(v[6]) + stalls < tonumber(v[8]) then
        redis.call('HSET', k, 'status', 'pending')
        move_idx(id, q, 'running', 'pending')
        add_pending(id, q, prio, tonumber(v[12]))
        woken[q] = true
      else
        redis.call('HSET', k, 'failure_reason', reason)
        terminate(id, q, 'running', 'failed', now, now_s, ukey)
      end
    else
      local failures = tonumber(v[6]) + 1
      redis.call('HSET', k, 'failures', failures)
      if kind == 'error' and failures + tonumber(v[7]) < tonumber(v[8]) then
        local run_at = now + tonumber(ARGV[i + 9])
        redis.call('HSET', k, 'status', 'pending', 'run_at', fmt(run_at))
        move_idx(id, q, 'running', 'pending')
        add_pending(id, q, prio, run_at)
        woken[q] = true
      else
        redis.call('HSET', k, 'failure_reason', reason)
        terminate(id, q, 'running', 'failed', now, now_s, ukey)
      end
    end
  end
end
wake(woken)
return rejected
