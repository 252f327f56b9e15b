-- enqueue(batch): one script for the whole batch so ids, the unique index and the pending
-- indexes move together; a unique_key hit returns the live holder's id (first occurrence in
-- the batch wins because the key is recorded as soon as its job is inserted).
-- All or nothing: Redis never rolls a script back, so a job that fails half-way would leave
-- the jobs before it (and its own hash) behind. Every job of the batch is therefore checked
-- here BEFORE the first write (the store checked them with tether.limits already; this is
-- the last line, for values only Lua sees: numbers it cannot parse, nan, inf).
-- Replays: with a request id, the ids are stored under P:req:enqueue:<rid> in this same
-- script; a repeat of the call answers from it and inserts nothing.
-- ARGV: P, now|'', rid|'', rid_ttl_ms, then per job 10 fields:
--   task, payload, queue, priority, run_at|'', delay, max_attempts, max_stalls, has_unique, key
-- Returns the ids in input order (integers).
local now, now_s = clock(ARGV[2])
local rid, rid_ttl = ARGV[3], ARGV[4]
local seen = req_get('enqueue', rid)
if seen then return split_ids(seen) end
local N, FIRST = 10, 5
local MAX_INT32, MAX_EPOCH, MAX_DELAY = 2147483647, 253402300799, 3155760000

local function finite(x, low, high) return x ~= nil and x == x and x >= low and x <= high end
local function whole(x, low, high) return finite(x, low, high) and math.floor(x) == x end

if (#ARGV - FIRST + 1) % N ~= 0 then return redis.error_reply('ERR enqueue: bad argument count') end
local n = 0
for i = FIRST, #ARGV, N do
  n = n + 1
  local bad = nil
  if ARGV[i] == '' then bad = 'task name'
  elseif ARGV[i + 2] == '' then bad = 'queue'
  elseif not whole(tonumber(ARGV[i + 3]), -MAX_INT32 - 1, MAX_INT32) then bad = 'priority'
  elseif ARGV[i + 4] ~= '' and not finite(tonumber(ARGV[i + 4]), 0, MAX_EPOCH) then bad = 'run_at'
  elseif not finite(tonumber(ARGV[i + 5]), 0, MAX_DELAY) then bad = 'delay'
  elseif not whole(tonumber(ARGV[i + 6]), 1, MAX_INT32) then bad = 'max_attempts'
  elseif not whole(tonumber(ARGV[i + 7]), 1, MAX_INT32) then bad = 'max_stalls'
  elseif ARGV[i + 8] == '1' and ARGV[i + 9] == '' then bad = 'unique_key'
  end
  if bad then
    return redis.error_reply('ERR enqueue refused, nothing written: job ' .. (n - 1)
      .. ' of the batch: bad ' .. bad)
  end
end

local out, woken = {}, {}
for i = FIRST, #ARGV, N do
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
req_put('enqueue', rid, join_ids(out), rid_ttl)
wake(woken)
return out
