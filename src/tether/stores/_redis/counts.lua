-- counts: ZCARD of each (queue, status) index zset in one consistent snapshot; O(queues).
-- ARGV: P
-- Returns flat triples {queue, status, count} for non-zero counts.
local statuses = {'waiting', 'pending', 'running', 'done', 'failed', 'cancelled'}
local out = {}
for _, q in ipairs(redis.call('SMEMBERS', P .. ':queues')) do
  for _, st in ipairs(statuses) do
    local n = redis.call('ZCARD', P .. ':idx:' .. q .. ':' .. st)
    if n > 0 then
      out[#out + 1] = q
      out[#out + 1] = st
      out[#out + 1] = n
    end
  end
end
return out
