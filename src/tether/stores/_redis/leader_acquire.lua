-- leader_acquire: insert-if-absent-or-expired (SET NX PX in spirit). The lease is a hash
-- {holder, term, expires_at} judged against the given/store clock rather than a Redis TTL, so
-- tests can drive time; the term comes from a separate counter key that is never deleted, so
-- it keeps growing across expiries and releases (a fencing token for the leader's writes).
-- A live lease of the caller's own is returned as it is (same term, same expiry: it is not a
-- new acquisition and not a renewal), so an acquire whose reply was lost and that is sent
-- again leaves an acting leader instead of a holder that believes it lost.
-- ARGV: P, now|'', name, holder, ttl
-- Returns {holder, term, expires_at} or nil.
local now = clock(ARGV[2])
room()  -- at the memory limit, fail here before the first write (_lib.lua)
local k = P .. ':leader:' .. ARGV[3]
local v = redis.call('HMGET', k, 'holder', 'term', 'expires_at')
if v[3] and tonumber(v[3]) > now then
  if v[1] == ARGV[4] then return {v[1], tonumber(v[2]), v[3]} end
  return nil
end
local term = redis.call('INCR', P .. ':leader_term:' .. ARGV[3])
local expires = fmt(now + tonumber(ARGV[5]))
redis.call('HSET', k, 'holder', ARGV[4], 'term', term, 'expires_at', expires)
return {ARGV[4], term, expires}
