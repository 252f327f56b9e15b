-- finish(batch): apply every outcome of a batch in one script, each fenced on its own by
-- (id, attempt, owner, token, status running): a stale outcome next to the valid one for the
-- same job is rejected and the valid one applied, in batch order.
-- Replays: an outcome that was applied already (row no longer running, same attempt, owner
-- and token, and the same outcome: finish keeps the token and a digest of the applied
-- outcome in lease_outcome for this) is neither applied again nor reported rejected. That
-- covers a finish whose reply was lost and that is sent again, and the exact same outcome
-- twice in one batch; any other outcome of a claim that already ended is rejected.
-- Counting rules are those of tether.stores._contract (shared with reap.lua):
--   done / cancelled -> terminal; released -> pending, interruptions + 1, run_at unchanged
--   (due at once, first in line) unless retry_delay > 0 (then now + retry_delay);
--   error -> failures + 1, pending at now + retry_delay while failures + stall_count <
--   max_attempts, else failed; dead -> failures + 1 and failed at once;
--   stalled -> stall_count + 1, pending with run_at unchanged while stall_count < max_stalls
--   and failures + stall_count < max_attempts (the rule of reap.lua), else failed.
--   snoozed (issue 19) -> pending at now + retry_delay, snoozes + 1, nothing else counted;
--   its errors record (reason 'snoozed', the error text or 'snoozed') leaves last_error be.
--   A cancel request sticks: error, stalled, released and snoozed end the job 'cancelled' instead of
--   pending or failed-by-budget; done stays done, dead stays failed.
-- Error records carry the lease's owner and the reason (given, else by kind).
-- Workflows (invariant 6): a job that ends here (done, failed, cancelled) resolves its
-- waiting children at the end of this script (resolve_links, _lib.lua): released when it was
-- their last parent, or cancelled with their waiting descendants. Only the fenced outcome
-- that ends the job gets there: a replay or a stale outcome changes nothing, so resolves
-- nothing. A job without children (no 'waiters' field) pays nothing for it.
-- ARGV: P, now|'', outcomes: ONE JSON array (rows.finish_args) of one array per outcome, 11
--   strings each: id, attempt, owner, token, kind, has_result, result, has_error, error,
--   reason|'', retry_delay. Why one JSON argument and not 11 per outcome: the client encoded
--   each of 1,100 arguments of a batch of 100 one by one (redis-py), a visible share of the
--   worker's CPU per job; json.dumps and cjson.decode do the batch in C. Every value stays
--   the text it was, so the fences compare and the digest hashes the same bytes as before.
-- The ids that ended (done, failed, cancelled; children cancelled with them too) are published
-- on P:done (announce, _lib.lua).
-- Returns the 1-based positions of rejected outcomes.
-- Cost per applied outcome: the fence's HMGET, one HSET (every field the outcome changes,
-- lease_outcome included) and one HDEL (the lease); the index moves of the whole batch
-- (P:running, the status indexes, P:finished:*) are gathered and written once per key before
-- the children are resolved. Gathering is safe because a job is applied at most once per
-- batch: its HSET leaves running before the next outcome is fenced, and nothing in this
-- script reads those indexes before they are written.
local now, now_s = clock(ARGV[2])
room()  -- at the memory limit, fail here before the first write (_lib.lua)
local rejected, woken = {}, {}
local DEFAULT_REASON = {error = 'error', dead = 'error', released = 'released',
  cancelled = 'cancelled', stalled = 'stalled'}
-- the gathered index moves: ids leaving P:running; P:idx:<q>:running -> ids leaving it;
-- P:idx:<q>:<status> -> (id, id) pairs entering it; status -> (now, id) pairs entering
-- P:finished:<status> (keyed by status: its key is made once, at the flush)
local off_running, idx_out, idx_in, fin = {}, {}, {}, {}
-- Server time (issue #23): the index keys are made once per (queue, status), not per job
-- (IDX_KEYS[q][status], 'running' included), and every value goes to redis.call as text:
-- redis.call formats each Lua number with %.17g, so a finished_at score goes as now_s (the
-- text now was read from, the same double) and counters as their '%d' text.
local IDX_KEYS = {}
local function idx_key(q, status)
  local byq = IDX_KEYS[q]
  if not byq then
    byq = {}
    IDX_KEYS[q] = byq
  end
  local key = byq[status]
  if not key then
    key = P .. ':idx:' .. q .. ':' .. status
    byq[status] = key
  end
  return key
end

-- Job `id` of queue q leaves running for status `new` (unlock and move_idx, gathered). The
-- lease fields go in the caller's one HDEL; the token and its owner stay (applied, _lib.lua).
local function leave(id, q, new)
  off_running[#off_running + 1] = id
  push(idx_out, idx_key(q, 'running'), id)
  push(idx_in, idx_key(q, new), id, id)
end

-- terminate() of _lib.lua with the index moves gathered and the hash fields added to `sets`.
local function ends(id, q, new, ukey, kids, sets)
  ENDED[#ENDED + 1] = id
  leave(id, q, new)
  push(fin, new, now_s, id)
  local n = #sets
  sets[n + 1], sets[n + 2], sets[n + 3], sets[n + 4] = 'status', new, 'finished_at', now_s
  release_unique(id, ukey)
  if kids then LINKED[#LINKED + 1] = {id, new} end
end

-- Back to pending, due at run_at (a number).
local function back(id, q, prio, run_at, sets)
  local n = #sets
  sets[n + 1], sets[n + 2] = 'status', 'pending'
  leave(id, q, 'pending')
  add_pending(id, q, prio, run_at)
  woken[q] = true
end

for n, o in ipairs(cjson.decode(ARGV[3])) do
  local id, attempt, owner, token, kind = o[1], o[2], o[3], o[4], o[5]
  -- one concatenation, no table per outcome: the same bytes as table.concat(..., '\n')
  local digest = redis.sha1hex(kind .. '\n' .. o[6] .. '\n' .. o[7] .. '\n' .. o[8] .. '\n'
    .. o[9] .. '\n' .. o[10] .. '\n' .. o[11])
  local v = fenced(id, attempt, owner, token)
  if not v then
    if not applied(id, attempt, owner, token, digest) then rejected[#rejected + 1] = n end
  else
    local k = jk(id)
    local sets = {'lease_outcome', digest}
    -- kids: the 'waiters' flag (fenced's HMGET): children to resolve if the job ends here
    local q, prio, ukey, kids = v[4], v[5], v[10], v[14]
    local cancel = v[11] == '1'
    local reason = o[10]
    if reason == '' then reason = DEFAULT_REASON[kind] end
    if kind == 'snoozed' then
      -- a snooze is always on record (when and by whom it was put back) but is no error:
      -- reason fixed, text defaulted, last_error kept
      local text = o[9]
      if o[8] ~= '1' then text = 'snoozed' end
      add_error(id, attempt, text, 'snoozed', now_s, owner, true)
    elseif o[8] == '1' then
      add_error(id, attempt, o[9], reason, now_s, owner)
    end
    local delay = tonumber(o[11])
    if kind == 'done' then
      if o[6] == '1' then add(sets, 'result', o[7]) end
      ends(id, q, 'done', ukey, kids, sets)
    elseif kind == 'cancelled' then
      ends(id, q, 'cancelled', ukey, kids, sets)
    elseif kind == 'released' then
      redis.call('HINCRBY', k, 'interruptions', 1)
      if cancel then
        ends(id, q, 'cancelled', ukey, kids, sets)
      else
        local run_at = tonumber(v[12])
        if delay > 0 then
          run_at = now + delay
          add(sets, 'run_at', fmt(run_at))
        end
        back(id, q, prio, run_at, sets)
      end
    elseif kind == 'snoozed' then
      -- counted apart (snoozes), so neither the failure budget nor tries is used
      redis.call('HINCRBY', k, 'snoozes', 1)
      if cancel then
        ends(id, q, 'cancelled', ukey, kids, sets)
      else
        -- due again after the handler's delay, on the store's clock
        local run_at = now + delay
        add(sets, 'run_at', fmt(run_at))
        back(id, q, prio, run_at, sets)
      end
    elseif kind == 'stalled' then
      local stalls = tonumber(v[7]) + 1
      add(sets, 'stall_count', string.format('%d', stalls))
      if cancel then
        ends(id, q, 'cancelled', ukey, kids, sets)
      elseif stalls < tonumber(v[9]) and tonumber(v[6]) + stalls < tonumber(v[8]) then
        back(id, q, prio, tonumber(v[12]), sets)
      else
        add(sets, 'failure_reason', reason)
        ends(id, q, 'failed', ukey, kids, sets)
      end
    else
      local failures = tonumber(v[6]) + 1
      add(sets, 'failures', string.format('%d', failures))
      if kind == 'error' and cancel then
        ends(id, q, 'cancelled', ukey, kids, sets)
      elseif kind == 'error' and failures + tonumber(v[7]) < tonumber(v[8]) then
        local run_at = now + delay
        add(sets, 'run_at', fmt(run_at))
        back(id, q, prio, run_at, sets)
      else
        add(sets, 'failure_reason', reason or 'error')
        ends(id, q, 'failed', ukey, kids, sets)
      end
    end
    -- the job's one write (it leaves running here: a repeat of it in this batch is fenced out)
    redis.call('HSET', k, unpack(sets))
    redis.call('HDEL', k, 'locked_by', 'lease_until')
  end
end
-- the gathered index moves, one call per key
if #off_running > 0 then bulk('ZREM', P .. ':running', off_running) end
for key, ids in pairs(idx_out) do bulk('ZREM', key, ids) end
for key, pairs_ in pairs(idx_in) do bulk('ZADD', key, pairs_) end
for status, pairs_ in pairs(fin) do bulk('ZADD', P .. ':finished:' .. status, pairs_) end
-- the children of the jobs that ended here move in this same script (invariant 6)
resolve_links(now, now_s, woken)
wake(woken)
announce()
return rejected
