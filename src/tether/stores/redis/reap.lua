-- reap: one set-based write. The running zset is scored by lease_until, so the expired
-- leases are a single range read (score < now - stall_grace, at most `limit`) and only those
-- jobs are touched; a second reaper finds them gone from the range. Stall rule (base.py):
-- stall_count + 1; back to pending while stall_count < max_stalls and
-- failures + stall_count < max_attempts, else failed with reason 'stalled'. A job put back
-- keeps its run_at: it was due when claimed, so it is due at once and keeps its place in line
-- (run_at = now would send recovered jobs to the back of a backlog). A job with a cancel
-- request ends 'cancelled' instead (the request sticks). The claim is over for good, so its
-- token is dropped: a late finish of the reaped attempt can never pass as a replay.
-- ARGV: P, now|'', stall_grace, limit, reaped_error_text
-- Returns per reaped job: {id, attempt, owner, status, stall_count}.
local now, now_s = clock(ARGV[2])
local cutoff = now - tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', P .. ':running', '-inf', '(' .. fmt(cutoff),
  'LIMIT', 0, tonumber(ARGV[4]))
local out, woken = {}, {}
for _, id in ipairs(ids) do
  local k = jk(id)
  local v = redis.call('HMGET', k, 'status', 'attempt', 'locked_by', 'queue', 'priority',
    'failures', 'stall_count', 'max_attempts', 'max_stalls', 'unique_key', 'run_at',
    'cancel_requested')
  if v[1] ~= 'running' then
    redis.call('ZREM', P .. ':running', id) -- a stray index entry; heal it
  else
    local q = v[4]
    local stalls = tonumber(v[7]) + 1
    redis.call('HSET', k, 'stall_count', stalls)
    add_error(id, v[2], ARGV[5], 'stalled', now_s, v[3])
    unlock(id)
    forget_token(id)
    local status
    if v[12] == '1' then
      status = 'cancelled'
      terminate(id, q, 'running', 'cancelled', now, now_s, v[10])
    elseif stalls < tonumber(v[9]) and tonumber(v[6]) + stalls < tonumber(v[8]) then
      status = 'pending'
      redis.call('HSET', k, 'status', 'pending')
      move_idx(id, q, 'running', 'pending')
      add_pending(id, q, v[5], tonumber(v[11]))
      woken[q] = true
    else
      status = 'failed'
      redis.call('HSET', k, 'failure_reason', 'stalled')
      terminate(id, q, 'running', 'failed', now, now_s, v[10])
    end
    out[#out + 1] = {tonumber(id), tonumber(v[2]), v[3], status, stalls}
  end
end
wake(woken)
return out
