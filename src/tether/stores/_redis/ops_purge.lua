-- ops_purge: delete up to `limit` jobs of one queue in the given states (never running), with
-- every index entry and the unique key of a pending job, in one atomic step.
-- ARGV: P, queue, statuses (newline-separated), limit
-- Returns how many jobs were deleted.
local q, limit = ARGV[2], tonumber(ARGV[4])
local deleted = 0
for st in string.gmatch(ARGV[3], '[^\n]+') do
  if st ~= 'running' and deleted < limit then
    local ik = P .. ':idx:' .. q .. ':' .. st
    for _, id in ipairs(redis.call('ZRANGE', ik, 0, limit - deleted - 1)) do
      local v = redis.call('HMGET', jk(id), 'priority', 'unique_key')
      if st == 'pending' then
        remove_pending(id, q, v[1])
        release_unique(id, v[2])
      else
        redis.call('ZREM', P .. ':finished:' .. st, id)
      end
      redis.call('ZREM', ik, id)
      redis.call('DEL', jk(id))
      deleted = deleted + 1
    end
  end
end
return deleted
