-- claim(batch): the claim IS the lease grant, so picking and locking happen in one script.
-- Pending jobs live in one zset per (queue, priority) scored by run_at with zero-padded ids
-- as members, plus a per-queue zset of the priority levels present. For each queue we walk
-- its levels in ascending priority and range-read only due members (score <= now), so a
-- not-yet-due job is never returned even if the clock moves backwards, and the cost is
-- O(levels + limit * log n) per queue, never a scan. Candidates of all queues are merged by
-- (priority, run_at, id) and the first `limit` win.
-- The token: each claimed job gets lease_token = '<nonce>:<id>' (nonce: 128 random bits from
-- the claimer, or its request id) and lease_owner = owner, in this same write; every fenced
-- script matches it, so an id reused after data loss can never match an old claim.
-- Replays: the claimed ids are recorded under P:req:claim:<nonce> (TTL rec_ttl_ms). A repeat
-- with the same nonce returns the jobs of that record still running under its token and
-- owner, and claims nothing more: the worker gets the jobs it holds, none is orphaned.
-- ARGV: P, now|'', owner, limit, lease_ttl, nonce, rec_ttl_ms, queue...
-- Returns the claimed jobs in claim order, in claim_row's flat shape (_lib.lua).
-- Cost per job: one HMGET and one HSET (grant, _lib.lua); the index moves of the whole batch
-- (pending zsets, status indexes, P:running) are one call per key, not two or three per job.
local now, now_s = clock(ARGV[2])
local owner, limit, ttl = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local nonce, rec_ttl = ARGV[6], ARGV[7]
local replayed = claimed_before(nonce, owner)
if replayed then return replayed end
room()  -- at the memory limit, fail here before the first write (_lib.lua)
-- A candidate: {priority, run_at, id (numbers, the sort keys), queue, level key, member}.
-- The level key (queue \n prio) and the priority's number are made once per level, not per
-- job, and the member is kept as read (the padded id: no pad() again). Issue #23.
local cands = {}
local levels = {}  -- level key -> {queue, prio}
for i = 8, #ARGV do
  local q = ARGV[i]
  local got = 0
  local prios = redis.call('ZRANGE', P .. ':prios:' .. q, 0, -1)
  for _, prio in ipairs(prios) do
    if got >= limit then break end
    local due = redis.call('ZRANGEBYSCORE', P .. ':pending:' .. q .. ':' .. prio, '-inf', now_s,
      'WITHSCORES', 'LIMIT', '0', string.format('%d', limit - got))
    if #due > 0 then
      local p, lk = tonumber(prio), q .. '\n' .. prio
      levels[lk] = {q, prio}
      for j = 1, #due, 2 do
        cands[#cands + 1] = {p, tonumber(due[j + 1]), tonumber(due[j]), q, lk, due[j]}
        got = got + 1
      end
    end
  end
end
table.sort(cands, function(a, b)
  if a[1] ~= b[1] then return a[1] < b[1] end
  if a[2] ~= b[2] then return a[2] < b[2] end
  return a[3] < b[3]
end)
-- lease_s is the text of every score and field of the lease: redis.call would format the
-- number lease_until with the same %.17g once per job (issue #23), so the pairs carry lease_s.
local lease_s = fmt(now + ttl)
local out, ids, missing = {}, {}, 0
local unpend = {}  -- level key (queue \n prio) -> padded members leaving that pending zset
local idx_out, idx_in, running = {}, {}, {}  -- queue -> ids; queue -> (id, id) pairs; pairs
for n = 1, math.min(limit, #cands) do
  local c = cands[n]
  local id = string.format('%d', c[3])
  local q = c[4]
  push(unpend, c[5], c[6])
  -- A pending entry whose hash is gone (evicted, deleted by hand) or no longer pending is a
  -- stray: writing it would make a half job of it that no reader decodes and the reaper
  -- chokes on, wedging every claim and sweep. Its pending entry goes (above) and, for a
  -- missing hash, its index entry; the missing job is counted in P:incidents.
  local st = grant(out, id, owner, lease_s, now_s, nonce)
  if st == 'pending' then
    push(idx_out, q, id)
    push(idx_in, q, id, id)
    local r = #running
    running[r + 1], running[r + 2] = lease_s, id
    ids[#ids + 1] = id  -- already join_ids' '%d' text
  elseif not st then
    push(idx_out, q, id)
    missing = missing + 1
  end
end
-- The index moves, one call per key (remove_pending's rule: an emptied level leaves prios).
for lk, members in pairs(unpend) do
  local q, prio = levels[lk][1], levels[lk][2]
  local zk = P .. ':pending:' .. q .. ':' .. prio
  bulk('ZREM', zk, members)
  if redis.call('EXISTS', zk) == 0 then redis.call('ZREM', P .. ':prios:' .. q, prio) end
end
for q, l in pairs(idx_out) do bulk('ZREM', P .. ':idx:' .. q .. ':pending', l) end
for q, l in pairs(idx_in) do bulk('ZADD', P .. ':idx:' .. q .. ':running', l) end
if #running > 0 then bulk('ZADD', P .. ':running', running) end
if missing > 0 then redis.call('HINCRBY', P .. ':incidents', 'missing_jobs', missing) end
-- Only a claim that granted something is recorded: a replay of an empty claim may claim
-- afresh (the contract; nothing was orphaned). Idle workers claim empty on every wake-up and
-- poll, and each record was a key with a TTL (>= 60 s) that nobody would ever read.
if #ids > 0 then req_put('claim', nonce, table.concat(ids, ','), rec_ttl) end
return out
