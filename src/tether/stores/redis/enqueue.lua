-- enqueue(batch): one script for the whole batch so ids, the unique index and the pending
-- indexes move together; a unique_key hit returns the live holder's id (first occurrence in
-- the batch wins because the key is recorded as soon as its job is inserted).
-- ARGV: P, now|'', then per job 10 fields:
--   task, payload, queue, priority, run_at|'', delay, max_attempts, max_stalls, has_unique, key
-- Returns the ids in input order (integers).
local now, now_s = clock(ARGV[2])
local out, woken = {}, {}
local N = 10
for i = 3, #ARGV, N do
  local task, payload, q, prio = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local ukey = nil
  if ARGV[i + 8] == '1' then ukey = ARGV[i + 9] end
  local existing = nil
  if ukey then
    existing = redis.call('HGET', P .. ':unique', ukey)
    if existing then
      local st = redis.call('HGET', jk(existing), 'status')
      if st ~= 'pending' and st ~= 'running' then existing = nil end
    end
  end
  if existing then
    out[#out + 1] = tonumber(existing)
  else
    local id = redis.call('INCR', P .. ':ids')
    local run_at, run_at_s
    if ARGV[i + 4] ~= '' then
      run_at, run_at_s = tonumber(ARGV[i + 4]), ARGV[i + 4]
    else
      run_at = now + tonumber(ARGV[i + 5])
      run_at_s = fmt(run_at)
    end
    local k = jk(id)
    redis.call('HSET', k, 'id', id, 'task', task, 'queue', q, 'payload', payload,
      'status', 'pending', 'priority', prio, 'run_at', run_at_s, 'attempt', 0,
      'max_attempts', ARGV[i + 6], 'failures', 0, 'stall_count', 0,
      'max_stalls', ARGV[i + 7], 'interruptions', 0, 'created_at', now_s,
      'cancel_requested', 0, 'errors', '[]')
    if ukey then
      redis.call('HSET', k, 'unique_key', ukey)
      redis.call('HSET', P .. ':unique', ukey, id)
    end
    redis.call('SADD', P .. ':queues', q)
    add_pending(id, q, prio, run_at)
    move_idx(id, q, nil, 'pending')
    woken[q] = true
    out[#out + 1] = id
  end
end
wake(woken)
return out
