-- retry_failed: dead-letter retry in one script. failed -> pending due now with failures,
-- stall_count and failure_reason reset; attempt stays (it is the fence token). The job leaves
-- the failed zset (scored by finished_at) and re-enters the pending indexes; its unique key is
-- taken again only if no other live job holds it meanwhile.
-- ARGV: P, now|'', all ('1' = every failed job, '0' = the ids that follow), id...
-- Returns how many jobs moved.
local now, now_s = clock(ARGV[2])
local ids
if ARGV[3] == '1' then
  ids = redis.call('ZRANGE', P .. ':finished:failed', 0, -1)
else
  ids = {}
  for i = 4, #ARGV do ids[#ids + 1] = ARGV[i] end
end
local moved, woken = 0, {}
for _, id in ipairs(ids) do
  local k = jk(id)
  local v = redis.call('HMGET', k, 'status', 'queue', 'priority', 'unique_key')
  if v[1] == 'failed' then
    local q = v[2]
    redis.call('ZREM', P .. ':finished:failed', id)
    redis.call('HSET', k, 'status', 'pending', 'run_at', now_s, 'failures', 0,
      'stall_count', 0)
    redis.call('HDEL', k, 'failure_reason', 'finished_at')
    move_idx(id, q, 'failed', 'pending')
    add_pending(id, q, v[3], now)
    if v[4] then redis.call('HSETNX', P .. ':unique', v[4], id) end
    woken[q] = true
    moved = moved + 1
  end
end
wake(woken)
return moved
