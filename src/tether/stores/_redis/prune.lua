-- prune: terminal jobs sit in one zset per terminal status scored by finished_at, so "finished
-- before now - older_than" is one range read of at most `limit` members; each job's hash and
-- index entries go in the same script. A non-terminal status has no such zset: nothing goes.
-- ARGV: P, now|'', status, older_than, limit
-- Returns how many jobs were deleted.
local now = clock(ARGV[2])
local status = ARGV[3]
local fk = P .. ':finished:' .. status
local ids = redis.call('ZRANGEBYSCORE', fk, '-inf', '(' .. fmt(now - tonumber(ARGV[4])),
  'LIMIT', 0, tonumber(ARGV[5]))
for _, id in ipairs(ids) do
  local q = redis.call('HGET', jk(id), 'queue')
  if q then redis.call('ZREM', P .. ':idx:' .. q .. ':' .. status, id) end
  redis.call('DEL', jk(id))
  redis.call('ZREM', fk, id)
end
return #ids
