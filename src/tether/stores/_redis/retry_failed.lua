-- retry_failed: dead-letter retry in one script. failed -> pending due now with failures,
-- stall_count, failure_reason and cancel_requested reset; attempt stays (it is the fence
-- counter). The job leaves the failed zset (scored by finished_at) and re-enters the pending
-- indexes. The old claim's token is dropped (that claim is over for good).
-- Workflows: the job's links as a parent resolved when it failed (its waiting children were
-- cancelled then); its children are not touched again, however this new attempt ends.
-- Unique keys: a failed job whose unique_key is held by a live (waiting, pending, running)
-- job stays failed and is reported in the conflicts, so there are never two live jobs with
-- one key; the first retried job of a batch takes a free key, later ones with the same key
-- conflict.
-- Replays: the reply is recorded under P:req:retry:<rid>; a repeat answers from it.
-- ARGV: P, now|'', rid|'', rid_ttl_ms, all ('1' = every failed job, '0' = the ids that
--   follow), id...
-- Returns {moved, conflict ids (ascending)}.
local now, now_s = clock(ARGV[2])
local rid, rid_ttl = ARGV[3], ARGV[4]
local seen = req_get('retry', rid)
if seen then
  local moved, rest = string.match(seen, '^(%d+)|(.*)$')
  return {tonumber(moved), split_ids(rest)}
end
room()  -- at the memory limit, fail here before the first write (_lib.lua)
local ids
if ARGV[5] == '1' then
  ids = redis.call('ZRANGE', P .. ':finished:failed', 0, -1)
else
  ids = {}
  for i = 6, #ARGV do ids[#ids + 1] = ARGV[i] end
end
local moved, woken, conflicts = 0, {}, {}
for _, id in ipairs(ids) do
  local k = jk(id)
  local v = redis.call('HMGET', k, 'status', 'queue', 'priority', 'unique_key')
  if v[1] == 'failed' then
    local holder = nil
    if v[4] then
      holder = redis.call('HGET', P .. ':unique', v[4])
      if holder then
        local st = redis.call('HGET', jk(holder), 'status')
        -- a live job holds its key: pending, running, or waiting on its parents (issue 20)
        if holder == tostring(id) or (st ~= 'pending' and st ~= 'running' and st ~= 'waiting')
        then holder = nil end
      end
    end
    if holder then
      conflicts[#conflicts + 1] = tonumber(id)
    else
      local q = v[2]
      redis.call('ZREM', P .. ':finished:failed', id)
      redis.call('HSET', k, 'status', 'pending', 'run_at', now_s, 'failures', 0,
        'stall_count', 0, 'cancel_requested', 0)
      redis.call('HDEL', k, 'failure_reason', 'finished_at')
      forget_token(id)
      move_idx(id, q, 'failed', 'pending')
      add_pending(id, q, v[3], now)
      if v[4] then redis.call('HSET', P .. ':unique', v[4], id) end
      woken[q] = true
      moved = moved + 1
    end
  end
end
table.sort(conflicts)
req_put('retry', rid, moved .. '|' .. join_ids(conflicts), rid_ttl)
wake(woken)
return {moved, conflicts}
