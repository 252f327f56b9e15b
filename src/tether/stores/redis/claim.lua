-- claim(batch): the claim IS the lease grant, so picking and locking happen in one script.
-- Pending jobs live in one zset per (queue, priority) scored by run_at with zero-padded ids
-- as members, plus a per-queue zset of the priority levels present. For each queue we walk
-- its levels in ascending priority and range-read only due members (score <= now), so a
-- not-yet-due job is never returned even if the clock moves backwards, and the cost is
-- O(levels + limit * log n) per queue, never a scan. Candidates of all queues are merged by
-- (priority, run_at, id) and the first `limit` win.
-- ARGV: P, now|'', owner, limit, lease_ttl, queue...
-- Returns one HGETALL array per claimed job, in claim order.
local now, now_s = clock(ARGV[2])
local owner, limit, ttl = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local cands = {}
for i = 6, #ARGV do
  local q = ARGV[i]
  local got = 0
  local levels = redis.call('ZRANGE', P .. ':prios:' .. q, 0, -1)
  for _, prio in ipairs(levels) do
    if got >= limit then break end
    local due = redis.call('ZRANGEBYSCORE', P .. ':pending:' .. q .. ':' .. prio, '-inf', now_s,
      'WITHSCORES', 'LIMIT', 0, limit - got)
    for j = 1, #due, 2 do
      cands[#cands + 1] = {tonumber(prio), tonumber(due[j + 1]), tonumber(due[j]), q, prio}
      got = got + 1
    end
  end
end
table.sort(cands, function(a, b)
  if a[1] ~= b[1] then return a[1] < b[1] end
  if a[2] ~= b[2] then return a[2] < b[2] end
  return a[3] < b[3]
end)
local lease_until = now + ttl
local lease_s = fmt(lease_until)
local out = {}
for n = 1, math.min(limit, #cands) do
  local c = cands[n]
  local id = tostring(c[3])
  local k = jk(id)
  remove_pending(id, c[4], c[5])
  move_idx(id, c[4], 'pending', 'running')
  redis.call('ZADD', P .. ':running', lease_until, id)
  redis.call('HINCRBY', k, 'attempt', 1)
  redis.call('HSET', k, 'status', 'running', 'locked_by', owner, 'lease_until', lease_s,
    'started_at', now_s, 'cancel_requested', 0)
  out[#out + 1] = redis.call('HGETALL', k)
end
return out
