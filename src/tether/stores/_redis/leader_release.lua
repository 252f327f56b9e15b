-- leader_release: compare-and-delete, so a stale leader cannot drop its successor's lease.
-- The term counter key stays: the next acquisition still gets term + 1.
-- ARGV: P, name, holder, term
-- Returns 1 when released, else 0.
local k = P .. ':leader:' .. ARGV[2]
local v = redis.call('HMGET', k, 'holder', 'term')
if v[1] ~= ARGV[3] or v[2] ~= ARGV[4] then return 0 end
redis.call('DEL', k)
return 1
