-- Shared prelude, prepended to every tether script before SCRIPT LOAD (so each script is
-- still ONE atomic EVALSHA). Why it is shaped so:
--  * ARGV[1] is always the key prefix P; every key is built here as P .. ':' .. something,
--    so no key ever escapes the prefix (standalone Redis only: keys are not declared in KEYS).
--  * Times travel as strings: Lua's tostring/.. keep only 14 significant digits, which would
--    round epoch seconds to 0.1 ms, so computed times are formatted with %.17g (exact round
--    trip) and given times are stored as the caller's own text.
--  * now: ARGV[2] when not '' (tests drive time), else the server's TIME: the store's clock.
--  * Absent hash field = None. Job ids inside pending zsets are zero-padded so equal run_at
--    scores tie-break by member bytes = numeric id order.
local P = ARGV[1]

local function jk(id) return P .. ':job:' .. id end
local function fmt(x) return string.format('%.17g', x) end
local function pad(id) return string.format('%016d', tonumber(id)) end

-- Ask for room before the first write. Why: at maxmemory under noeviction Redis refuses the
-- commands that may grow memory (ZADD, HSET, ...) only while the script has written nothing,
-- since it cannot stop one half-way; a script whose first write shrinks (the claim's ZREM
-- from the pending zset, the reaper's HDEL) then runs whole past the limit. So workers kept
-- claiming at the limit jobs whose heartbeats and outcomes (first write: HSET) were refused:
-- the queue wedged. ZADD XX of a member of a key that never exists is refused exactly when a
-- growing first write would be, and otherwise writes, replicates and allocates nothing. So a
-- script that writes calls room() first: at the limit it is refused whole (OOM, StoreFull to
-- the caller) having changed nothing.
local function room()
  redis.call('ZADD', P .. ':room', 'XX', 0, '-')
end

local function clock(arg)
  if arg ~= nil and arg ~= '' then return tonumber(arg), arg end
  local t = redis.call('TIME')
  local s = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
  return tonumber(s), s
end

local function move_idx(id, q, old, new)
  if old then redis.call('ZREM', P .. ':idx:' .. q .. ':' .. old, id) end
  redis.call('ZADD', P .. ':idx:' .. q .. ':' .. new, id, id)
end

local function add_pending(id, q, prio, run_at)
  redis.call('ZADD', P .. ':pending:' .. q .. ':' .. prio, run_at, pad(id))
  redis.call('ZADD', P .. ':prios:' .. q, prio, prio)
end

local function remove_pending(id, q, prio)
  local k = P .. ':pending:' .. q .. ':' .. prio
  redis.call('ZREM', k, pad(id))
  if redis.call('EXISTS', k) == 0 then redis.call('ZREM', P .. ':prios:' .. q, prio) end
end

-- A job leaving the non-terminal states frees its unique key (only if the key is still ours).
local function release_unique(id, ukey)
  if ukey and redis.call('HGET', P .. ':unique', ukey) == tostring(id) then
    redis.call('HDEL', P .. ':unique', ukey)
  end
end

-- Ids this script made terminal, announced once at its end (see announce).
local ENDED = {}

-- Move a pending or running job to a terminal status at now.
local function terminate(id, q, old, new, now, now_s, ukey)
  ENDED[#ENDED + 1] = id
  move_idx(id, q, old, new)
  redis.call('ZADD', P .. ':finished:' .. new, now, id)
  redis.call('HSET', jk(id), 'status', new, 'finished_at', now_s)
  release_unique(id, ukey)
end

-- Append one {"attempt","error","reason","at","owner"} record (the one shape every store
-- writes, from finish and reap alike) to the job's errors JSON text without decoding it (cjson
-- would re-format numbers); cjson only quotes the strings. The caller cleaned the error text.
-- keep_last: the record goes to errors only and last_error stays as it was (a snooze is not
-- an error, see finish.lua).
local function add_error(id, attempt, err, reason, now_s, owner, keep_last)
  local k = jk(id)
  local rec = '{"attempt":' .. attempt .. ',"error":' .. cjson.encode(err) .. ',"reason":'
    .. (reason and cjson.encode(reason) or 'null') .. ',"at":' .. now_s .. ',"owner":'
    .. cjson.encode(owner) .. '}'
  local errs = redis.call('HGET', k, 'errors')
  if not errs or errs == '[]' then errs = '[' .. rec .. ']'
  else errs = string.sub(errs, 1, -2) .. ',' .. rec .. ']' end
  if keep_last then redis.call('HSET', k, 'errors', errs)
  else redis.call('HSET', k, 'errors', errs, 'last_error', err) end
end

-- The fence: (id, attempt, owner, token) and status running. The token ('<nonce>:<id>', the
-- nonce random per claim) is what an id reused after data loss cannot match. Returns the
-- job's hash values or nil.
local function fenced(id, attempt, owner, token)
  local v = redis.call('HMGET', jk(id), 'status', 'attempt', 'locked_by', 'queue', 'priority',
    'failures', 'stall_count', 'max_attempts', 'max_stalls', 'unique_key', 'cancel_requested',
    'run_at', 'lease_token')
  if v[1] == 'running' and v[2] == attempt and v[3] == owner and v[13] == token then return v end
  return nil
end

-- A replayed outcome: this very outcome of this very claim was applied already (the row
-- left running and still carries the claim's token and owner, and the digest of the outcome
-- that finish applied: finish keeps all three for exactly this). Reap, a dead-letter retry and
-- a new claim replace or drop the token, so a stale lease never matches; a *different*
-- outcome from the same claim (a late 'error' after 'done') does not match the digest and is
-- rejected, since it was not applied.
local function applied(id, attempt, owner, token, digest)
  if token == '' then return false end
  local v = redis.call('HMGET', jk(id), 'status', 'attempt', 'lease_owner', 'lease_token',
    'lease_outcome')
  return v[1] ~= false and v[1] ~= 'running' and v[2] == attempt and v[3] == owner
    and v[4] == token and v[5] == digest
end

-- Leave running: drop the lease and the running-zset entry. The token and its owner stay
-- (see applied); forget_token drops them (and the applied outcome's digest) where the claim is over for good (reap, dlq retry).
local function unlock(id)
  redis.call('ZREM', P .. ':running', id)
  redis.call('HDEL', jk(id), 'locked_by', 'lease_until')
end

local function forget_token(id)
  redis.call('HDEL', jk(id), 'lease_token', 'lease_owner', 'lease_outcome')
end

-- Request records: a call that carries a request id stores its reply under
-- P:req:<kind>:<rid> (with a TTL) in the same script as its writes, so a replay of the call
-- (redis-py's retry after a lost reply, or the caller's own) answers from the record instead
-- of writing again. ttl_ms is chosen by the caller (see store.py).
local function req_key(kind, rid) return P .. ':req:' .. kind .. ':' .. rid end

local function req_get(kind, rid)
  if rid == '' then return nil end
  local v = redis.call('GET', req_key(kind, rid))
  if v == false then return nil end
  return v
end

local function req_put(kind, rid, value, ttl_ms)
  if rid ~= '' then redis.call('SET', req_key(kind, rid), value, 'PX', ttl_ms) end
end

-- Ids travel in request records as comma-separated integers (%d: exact below 2^53).
local function join_ids(ids)
  local parts = {}
  for i, id in ipairs(ids) do parts[i] = string.format('%d', id) end
  return table.concat(parts, ',')
end

local function split_ids(text)
  local ids = {}
  for part in string.gmatch(text, '[^,]+') do ids[#ids + 1] = tonumber(part) end
  return ids
end

local function wake(queues)
  local names = {}
  for q in pairs(queues) do names[#names + 1] = q end
  if #names > 0 then redis.call('PUBLISH', P .. ':wake', table.concat(names, '\n')) end
end

-- Completion notification for wait_for_finish: ONE publish per script on P:done, carrying the
-- comma-separated ids that became terminal (nothing when none did). Pub/sub is fire and
-- forget, so a waiter reads its jobs after subscribing and before it sleeps.
local function announce()
  if #ENDED > 0 then redis.call('PUBLISH', P .. ':done', table.concat(ENDED, ',')) end
end

-- Enqueue (enqueue.lua, schedule_tick.lua): a batch of jobs given as 12 ARGV fields each from
-- index `first` on: task, payload, queue, priority, run_at|'', delay, max_attempts, max_stalls,
-- has_unique, key, has_limit_key, limit_key. One definition, so a scheduled job keeps every
-- enqueue rule. The has_* flags exist because '' is a valid key, distinct from none.
-- All or nothing: Redis never rolls a script back, so a job that fails half-way would leave
-- the jobs before it (and its own hash) behind. enqueue_check therefore checks every job of
-- the batch BEFORE the first write (the store checked them with tether._limits already; this is
-- the last line, for values only Lua sees: numbers it cannot parse, nan, inf).
local ENQ_N = 12
local MAX_INT32, MAX_EPOCH, MAX_DELAY = 2147483647, 253402300799, 3155760000

local function finite(x, low, high) return x ~= nil and x == x and x >= low and x <= high end
local function whole(x, low, high) return finite(x, low, high) and math.floor(x) == x end

-- nil when the batch is fine, else an error reply naming the first bad field.
local function enqueue_check(first)
  if (#ARGV - first + 1) % ENQ_N ~= 0 then
    return redis.error_reply('ERR enqueue: bad argument count')
  end
  local n = 0
  for i = first, #ARGV, ENQ_N do
    n = n + 1
    local bad = nil
    if ARGV[i] == '' then bad = 'task name'
    elseif ARGV[i + 2] == '' then bad = 'queue'
    elseif not whole(tonumber(ARGV[i + 3]), -MAX_INT32 - 1, MAX_INT32) then bad = 'priority'
    elseif ARGV[i + 4] ~= '' and not finite(tonumber(ARGV[i + 4]), 0, MAX_EPOCH) then bad = 'run_at'
    elseif not finite(tonumber(ARGV[i + 5]), 0, MAX_DELAY) then bad = 'delay'
    elseif not whole(tonumber(ARGV[i + 6]), 1, MAX_INT32) then bad = 'max_attempts'
    elseif not whole(tonumber(ARGV[i + 7]), 1, MAX_INT32) then bad = 'max_stalls'
    elseif ARGV[i + 8] == '1' and ARGV[i + 9] == '' then bad = 'unique_key'
    end
    if bad then
      return redis.error_reply('ERR enqueue refused, nothing written: job ' .. (n - 1)
        .. ' of the batch: bad ' .. bad)
    end
  end
  return nil
end

-- Insert the (checked) batch; a unique_key hit yields the live holder's id (first occurrence in
-- the batch wins because the key is recorded as soon as its job is inserted). Returns the ids
-- in input order and the set of queues to wake.
-- uid: never reused, unlike the id (a restart without persistence or a failover to a replica
-- that lagged starts INCR again). SHA-1 of the server's own microsecond clock, the id and the
-- prefix: the same id handed out again comes at another microsecond, and no argument is added.
local function enqueue_insert(first, now, now_s)
  local out, woken = {}, {}
  local t = redis.call('TIME')
  local salt = P .. ':' .. t[1] .. '.' .. t[2] .. ':'
  for i = first, #ARGV, ENQ_N do
    local task, payload, q, prio = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    local ukey = nil
    if ARGV[i + 8] == '1' then ukey = ARGV[i + 9] end
    local existing = nil
    if ukey then
      existing = redis.call('HGET', P .. ':unique', ukey)
      if existing then
        local st = redis.call('HGET', jk(existing), 'status')
        if st ~= 'pending' and st ~= 'running' then existing = nil end
      end
    end
    if existing then
      out[#out + 1] = tonumber(existing)
    else
      local id = redis.call('INCR', P .. ':ids')
      local run_at, run_at_s
      if ARGV[i + 4] ~= '' then
        run_at, run_at_s = tonumber(ARGV[i + 4]), ARGV[i + 4]
      else
        run_at = now + tonumber(ARGV[i + 5])
        run_at_s = fmt(run_at)
      end
      local k = jk(id)
      redis.call('HSET', k, 'id', id, 'task', task, 'queue', q, 'payload', payload,
        'status', 'pending', 'priority', prio, 'run_at', run_at_s, 'attempt', 0,
        'max_attempts', ARGV[i + 6], 'failures', 0, 'stall_count', 0,
        'max_stalls', ARGV[i + 7], 'interruptions', 0, 'created_at', now_s,
        'cancel_requested', 0, 'errors', '[]',
        'uid', string.sub(redis.sha1hex(salt .. id), 1, 32))
      -- limit_key (issue 19): absent field = None; '' is a key of its own, so the flag decides
      if ARGV[i + 10] == '1' then redis.call('HSET', k, 'limit_key', ARGV[i + 11]) end
      if ukey then
        redis.call('HSET', k, 'unique_key', ukey)
        redis.call('HSET', P .. ':unique', ukey, id)
      end
      redis.call('SADD', P .. ':queues', q)
      add_pending(id, q, prio, run_at)
      move_idx(id, q, nil, 'pending')
      woken[q] = true
      out[#out + 1] = id
    end
  end
  return out, woken
end

-- A claim repeated with its request id (its reply was lost): the jobs of the recorded claim
-- still running under its token and owner (one HGETALL each), or nil when no claim with that
-- nonce was recorded. Shared by claim.lua and claim_flow.lua, so both answer replays alike.
local function claimed_before(nonce, owner)
  local seen = req_get('claim', nonce)
  if not seen then return nil end
  local out = {}
  for _, id in ipairs(split_ids(seen)) do
    local sid = string.format('%d', id)
    local v = redis.call('HMGET', jk(sid), 'status', 'locked_by', 'lease_token')
    if v[1] == 'running' and v[2] == owner and v[3] == nonce .. ':' .. sid then
      out[#out + 1] = redis.call('HGETALL', jk(sid))
    end
  end
  return out
end
