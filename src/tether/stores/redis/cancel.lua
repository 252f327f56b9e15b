-- cancel: decide on the job's current status inside the script so a concurrent claim cannot
-- slip between the read and the write. pending -> cancelled now (leaves the pending indexes,
-- frees its unique key); running -> cancel_requested = 1 (the holder learns it from its next
-- heartbeat and finishes with outcome 'cancelled'); terminal -> untouched.
-- ARGV: P, now|'', id
-- Returns 0 unknown id, 1 cancelled, 2 requested, 3 already finished.
local now, now_s = clock(ARGV[2])
local id = ARGV[3]
local v = redis.call('HMGET', jk(id), 'status', 'queue', 'priority', 'unique_key')
if not v[1] then return 0 end
if v[1] == 'pending' then
  remove_pending(id, v[2], v[3])
  terminate(id, v[2], 'pending', 'cancelled', now, now_s, v[4])
  return 1
end
if v[1] == 'running' then
  redis.call('HSET', jk(id), 'cancel_requested', 1)
  return 2
end
return 3
