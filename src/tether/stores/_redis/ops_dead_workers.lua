-- ops_dead_workers: forget workers last seen before now - older_than (they died without
-- unregistering); the row, its last_seen entry and its liveness token record (P:live, issue
-- #22: long reaped by then) go together.
-- ARGV: P, now|'', older_than
-- Returns how many rows were deleted.
local now = clock(ARGV[2])
local seen = P .. ':workers:seen'
local ids = redis.call('ZRANGEBYSCORE', seen, '-inf', '(' .. fmt(now - tonumber(ARGV[3])))
for _, id in ipairs(ids) do
  redis.call('HDEL', P .. ':workers', id)
  redis.call('ZREM', seen, id)
  redis.call('HDEL', P .. ':live', id)
end
return #ids
