-- heartbeat(batch): renew every lease still held in one round trip. Each lease is fenced by
-- (id, attempt, owner, token, status running); renewal moves the job's score in the running zset
-- (the reaper's range index) along with the hash. The worker's last_seen is touched in the
-- same script (ZADD XX: only a registered worker has a row to refresh). Idempotent: a replay
-- (lost reply) renews again from the server's clock, which is what the holder wanted.
-- ARGV: P, now|'', owner, lease_ttl, then per lease: id, attempt, lease_owner, token
-- Returns {lost positions (1-based), cancel-requested positions}.
local now, now_s = clock(ARGV[2])
room()  -- at the memory limit, fail here before the first write (_lib.lua)
local owner, ttl = ARGV[3], tonumber(ARGV[4])
local lease_until = now + ttl
local lease_s = fmt(lease_until)
local lost, cancel = {}, {}
local n = 0
for i = 5, #ARGV, 4 do
  n = n + 1
  local id = ARGV[i]
  local v = fenced(id, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])
  if v then
    redis.call('HSET', jk(id), 'lease_until', lease_s)
    redis.call('ZADD', P .. ':running', lease_until, id)
    if v[11] == '1' then cancel[#cancel + 1] = n end
  else
    lost[#lost + 1] = n
  end
end
redis.call('ZADD', P .. ':workers:seen', 'XX', now, owner)
return {lost, cancel}
