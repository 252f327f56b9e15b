-- prune: terminal jobs sit in one zset per terminal status scored by finished_at, so "finished
-- before now - older_than" is one range read of at most `limit` members; each job's hash, index
-- entries and workflow links (unlink, _lib.lua) go in the same script. A non-terminal status
-- has no such zset: nothing goes.
-- Invariant 6: a job with a child that is not terminal yet (waiting, pending, running) is
-- kept: that child will read its result. Kept jobs stay at the front of the range, so it is
-- read in pages from just past them; at most KEEP_BUDGET kept jobs are stepped over per call,
-- so a crowd of parents whose children still run cannot make one call long (each call starts
-- over; those parents go once their children end). A job outside any workflow is checked by
-- the HMGET that replaced the HGET of its queue: no extra call.
-- ARGV: P, now|'', status, older_than, limit
-- Returns how many jobs were deleted.
local now = clock(ARGV[2])
local status = ARGV[3]
local fk = P .. ':finished:' .. status
local cutoff = '(' .. fmt(now - tonumber(ARGV[4]))
local limit = tonumber(ARGV[5])
local KEEP_BUDGET = 10000
local TERMINAL = {done = true, failed = true, cancelled = true}

-- Whether one of the job's children is not terminal. Newest first: a child enqueued late is
-- the likeliest to be unfinished, so a kept parent costs few reads; a parent whose children
-- all ended costs one read per child, once (it is deleted right after). A child whose hash
-- is gone (evicted) waits for nothing.
local function open_child(id)
  for _, c in ipairs(redis.call('ZREVRANGE', P .. ':children:' .. id, 0, -1)) do
    local st = redis.call('HGET', jk(c), 'status')
    if st and not TERMINAL[st] then return true end
  end
  return false
end

local deleted, kept = 0, 0
while deleted < limit and kept < KEEP_BUDGET do
  local want = limit - deleted
  local ids = redis.call('ZRANGEBYSCORE', fk, '-inf', cutoff, 'LIMIT', kept, want)
  for _, id in ipairs(ids) do
    -- queue: its index entry; children / waiting_on: whether it has links (absent: none)
    local v = redis.call('HMGET', jk(id), 'queue', 'children', 'waiting_on')
    if v[2] and open_child(id) then
      kept = kept + 1
    else
      if v[1] then redis.call('ZREM', P .. ':idx:' .. v[1] .. ':' .. status, id) end
      unlink(id, v[3], v[2])
      redis.call('DEL', jk(id))
      redis.call('ZREM', fk, id)
      deleted = deleted + 1
    end
  end
  if #ids < want then break end  -- the range is exhausted: no second read (as before)
end
return deleted
