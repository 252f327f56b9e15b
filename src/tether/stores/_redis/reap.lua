-- reap: one set-based write. The running zset is scored by lease_until, so the expired
-- leases are a single range read (score < now - stall_grace, at most `limit`) and only those
-- jobs are touched; a second reaper finds them gone from the range. Stall rule (base.py):
-- stall_count + 1; back to pending while stall_count < max_stalls and
-- failures + stall_count < max_attempts, else failed with reason 'stalled'. A job put back
-- keeps its run_at: it was due when claimed, so it is due at once and keeps its place in line
-- (run_at = now would send recovered jobs to the back of a backlog). A job with a cancel
-- request ends 'cancelled' instead (the request sticks). The claim is over for good, so its
-- token is dropped: a late finish of the reaped attempt can never pass as a replay.
-- Jobs it dead-letters or cancels are published on P:done (announce, _lib.lua); their waiting
-- children are cancelled (dependency_failed, transitively) in this same script.
-- ARGV: P, now|'', stall_grace, limit, reaped_error_text[, owners_json]
-- With owners_json (a JSON list of worker ids the caller found dead: reap_dead, issue #22),
-- the jobs are selected by owner instead of by expiry: every running job whose locked_by is
-- one of them, in id order, at most `limit`; the rest (stall rule, fences, wake-ups,
-- announcements, links) is the same. That walk reads every running job's owner, O(running),
-- and runs only when a death was found. When it took back fewer than `limit`, every job of
-- these owners is back, and their tokens are marked reaped in P:live so the sub-second check
-- stops probing them.
-- Returns per reaped job: {id, attempt, owner, status, stall_count}.
-- Per job it is one HMGET, one HDEL, one HSET and the index moves (~7 calls, was ~13): a
-- mass expiry is 10,000 jobs in one script, and every call counts. The error record's
-- constant part is encoded once per sweep, each owner once (add_error's format, inlined), the
-- running-set removals go in one ZREM per 1,000 jobs, and each (queue, priority) level is
-- registered once.
local now, now_s = clock(ARGV[2])
room()  -- at the memory limit, fail here before the first write (_lib.lua)
local ids
local dead = ARGV[6] and ARGV[6] ~= '' and cjson.decode(ARGV[6]) or nil
if dead then
  local wanted, limit = {}, tonumber(ARGV[4])
  for _, owner in ipairs(dead) do wanted[owner] = true end
  ids = {}
  for _, id in ipairs(redis.call('ZRANGE', P .. ':running', 0, -1)) do
    local owner = redis.call('HGET', jk(id), 'locked_by')
    if owner and wanted[owner] then
      ids[#ids + 1] = id
      if #ids >= limit then break end
    end
  end
  table.sort(ids, function(a, b) return tonumber(a) < tonumber(b) end)
else
  local cutoff = now - tonumber(ARGV[3])
  ids = redis.call('ZRANGEBYSCORE', P .. ':running', '-inf', '(' .. fmt(cutoff),
    'LIMIT', 0, tonumber(ARGV[4]))
end
local err = ARGV[5]
local head = ',"error":' .. cjson.encode(err) .. ',"reason":"stalled","at":' .. now_s
  .. ',"owner":'
local owners, levels = {}, {}
local out, woken, missing = {}, {}, 0
for _, id in ipairs(ids) do
  local k = jk(id)
  local v = redis.call('HMGET', k, 'status', 'attempt', 'locked_by', 'queue', 'priority',
    'failures', 'stall_count', 'max_attempts', 'max_stalls', 'unique_key', 'run_at',
    'cancel_requested', 'errors', 'waiters')
  -- (a job not running is a stray index entry: the ZREM below heals it)
  if not v[1] or not (v[2] and v[4] and v[5] and v[6] and v[7] and v[8] and v[9] and v[11]) then
    -- The hash is gone (evicted, deleted by hand) or half there (what an older claim made
    -- of an evicted job): there is nothing to retry or dead-letter, and its nil fields
    -- would stop this sweep, and every later one, with a Lua error. Drop what is left (the
    -- ZREM below takes it out of the running range), count it in P:incidents, go on.
    if v[1] then redis.call('DEL', k) end
    local qs = v[4] and {v[4]} or redis.call('SMEMBERS', P .. ':queues')
    for _, q in ipairs(qs) do redis.call('ZREM', P .. ':idx:' .. q .. ':running', id) end
    missing = missing + 1
  elseif v[1] == 'running' then
    local q, owner = v[4], v[3]
    local stalls = tonumber(v[7]) + 1
    local enc = owners[owner]
    if enc == nil then
      enc = cjson.encode(owner)
      owners[owner] = enc
    end
    local rec = '{"attempt":' .. v[2] .. head .. enc .. '}'
    local errs = v[13]
    if not errs or errs == '[]' then errs = '[' .. rec .. ']'
    else errs = string.sub(errs, 1, -2) .. ',' .. rec .. ']' end
    -- unlock and forget the token: the claim is over for good
    redis.call('HDEL', k, 'locked_by', 'lease_until', 'lease_token', 'lease_owner',
      'lease_outcome')
    local status
    if v[12] == '1' then
      status = 'cancelled'
      redis.call('HSET', k, 'stall_count', stalls, 'errors', errs, 'last_error', err)
      terminate(id, q, 'running', 'cancelled', now, now_s, v[10], v[14])
    elseif stalls < tonumber(v[9]) and tonumber(v[6]) + stalls < tonumber(v[8]) then
      status = 'pending'
      redis.call('HSET', k, 'stall_count', stalls, 'errors', errs, 'last_error', err,
        'status', 'pending')
      move_idx(id, q, 'running', 'pending')
      redis.call('ZADD', P .. ':pending:' .. q .. ':' .. v[5], tonumber(v[11]), pad(id))
      levels[q .. '\n' .. v[5]] = {q, v[5]}
      woken[q] = true
    else
      status = 'failed'
      redis.call('HSET', k, 'stall_count', stalls, 'errors', errs, 'last_error', err,
        'failure_reason', 'stalled')
      terminate(id, q, 'running', 'failed', now, now_s, v[10], v[14])
    end
    out[#out + 1] = {tonumber(id), tonumber(v[2]), v[3], status, stalls}
  end
end
for i = 1, #ids, 1000 do
  redis.call('ZREM', P .. ':running', unpack(ids, i, math.min(i + 999, #ids)))
end
for _, level in pairs(levels) do
  redis.call('ZADD', P .. ':prios:' .. level[1], level[2], level[2])
end
if missing > 0 then redis.call('HINCRBY', P .. ':incidents', 'missing_jobs', missing) end
-- the waiting children of the jobs failed or cancelled here: cancelled in this same script
-- (invariant 6; v[14], the 'waiters' flag, said which jobs have any)
resolve_links(now, now_s, woken)
wake(woken)
announce()
if dead and #ids < tonumber(ARGV[4]) then
  for _, owner in ipairs(dead) do
    if redis.call('HEXISTS', P .. ':live', owner) == 1 then
      redis.call('HSET', P .. ':live', owner, 'reaped')
    end
  end
end
return out
