-- leader_renew: compare-and-extend. Extends only when (holder, term) still hold the lease and
-- it has not expired, so a leader that slept past its lease can never resurrect it after
-- another process took (or could have taken) over.
-- ARGV: P, now|'', name, holder, term, ttl
-- Returns {holder, term, expires_at} or nil.
local now = clock(ARGV[2])
room()  -- at the memory limit, fail here before the first write (_lib.lua)
local k = P .. ':leader:' .. ARGV[3]
local v = redis.call('HMGET', k, 'holder', 'term', 'expires_at')
if v[1] ~= ARGV[4] or v[2] ~= ARGV[5] or tonumber(v[3]) <= now then return nil end
local expires = fmt(now + tonumber(ARGV[6]))
redis.call('HSET', k, 'expires_at', expires)
return {ARGV[4], tonumber(ARGV[5]), expires}
