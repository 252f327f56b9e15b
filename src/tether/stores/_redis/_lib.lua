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

-- The third value is TIME's own reply (nil when the caller gave the time): enqueue_insert salts
-- its uids with it instead of asking the server's clock a second time.
local function clock(arg)
  if arg ~= nil and arg ~= '' then return tonumber(arg), arg end
  local t = redis.call('TIME')
  local s = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
  return tonumber(s), s, t
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

-- Workflows (issue #20, invariant 6 of tether/stores/_contract.py). The link keys (listed
-- with every key in store.py):
--   P:parents:<id>   list  the job's `after` ids, deduplicated, in `after` order; kept until the
--                          job itself is pruned or purged (job_links lists a parent pruned since)
--   P:children:<id>  zset  jobs that named <id> in `after`, score = their id (ascending listing);
--                          a child leaves it when it is pruned or purged
--   P:waiters:<id>   set   children whose link to <id> is unresolved; the write that ends <id>
--                          reads and deletes it whole, which is what resolves each link once
-- and the job hash fields, absent on a job outside any workflow:
--   waiting_on     (child)  parents not resolved yet (0 once it is no longer waiting)
--   allow_failure  (child)  '1': a failed or cancelled parent counts as resolved
--   children       (parent) '1': P:children:<id> has held ids (prune's keep rule reads them)
--   waiters        (parent) '1': P:waiters:<id> holds ids. finish, reap, cancel and purge read
--                  this flag in the HMGET they make anyway, so a job without children costs
--                  no extra call to end (the no-workflow finish is unchanged).
-- Jobs this script ended (or deleted) whose children wait, each {id, how}: how is the status
-- it ended with, or 'purged'. resolve_links drains it before the script returns, so the
-- children move in the same atomic write as their parent.
local LINKED = {}
local DEP_FAILED = 'dependency_failed'

-- Move a waiting, pending or running job to a terminal status at now. waiters: the job's
-- 'waiters' field as the caller read it (nil: no child waits on it, nothing more to do).
local function terminate(id, q, old, new, now, now_s, ukey, waiters)
  ENDED[#ENDED + 1] = id
  move_idx(id, q, old, new)
  redis.call('ZADD', P .. ':finished:' .. new, now, id)
  redis.call('HSET', jk(id), 'status', new, 'finished_at', now_s)
  release_unique(id, ukey)
  if waiters then LINKED[#LINKED + 1] = {id, new} end
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

-- Run `cmd key <args...>` over a long argument list in slices (unpack has a C-stack limit;
-- 1,000 is even, so score/member pairs never split): one call per 1,000 instead of one each.
local function bulk(cmd, key, args)
  for j = 1, #args, 1000 do
    redis.call(cmd, key, unpack(args, j, math.min(j + 999, #args)))
  end
end

-- Append a (and b, when given) to the list t[key] (made on first use): the groups bulk() then
-- writes. Two named values, not `...`: packing them in a table to loop over was a quarter of
-- enqueue_many's per-job server time (issue #23); every caller appends one or two.
local function push(t, key, a, b)
  local l = t[key]
  if not l then
    l = {}
    t[key] = l
  end
  local n = #l
  l[n + 1] = a
  if b ~= nil then l[n + 2] = b end
end

-- Append values to the flat list l (the field/value pairs of one HSET).
local function add(l, ...)
  local n = #l
  for j = 1, select('#', ...) do l[n + j] = select(j, ...) end
end

-- Resolve the links of every job in LINKED (and of the jobs that cancels, transitively), in
-- the calling script, so children move in the same atomic write as the parent that decided
-- them (invariant 6). For each parent: its waiters set is read and deleted (a link resolves
-- once: a replayed finish, a retried dead letter that ends again, find nothing), then each
-- child still 'waiting' (only those change; a link of a child that ended meanwhile is just
-- dropped):
--  * parent done, or the child allows failure: waiting_on - 1 (HINCRBY re-reads the counter,
--    so two parents resolving in one batch count both); at 0 the child becomes pending, due
--    at max(run_at, now) (it waited for its parents, not for a time that passed meanwhile).
--  * otherwise: the child is cancelled, reason dependency_failed, with an error record naming
--    the parent (add_error's shape; attempt: the child's, 0, it never ran; owner null), and
--    goes to the back of LINKED so its own waiting children follow. Each job is cancelled
--    once (it is no longer waiting after), so the loop ends after one pass per job at most.
-- Cost: a parent with 10,000 children is one script call, and every call counts, so per child
-- it is one HMGET and one HSET (plus HINCRBY for a release, the unique key's for a cancel);
-- the index moves (status indexes, pending zsets, finished zset) are gathered and written
-- once per 1,000 children at the end (bulk), each priority level registered once. The
-- hashes are written at once, so whatever the loop reads meanwhile is current; the indexes
-- are whole again before this returns.
-- woken: the caller's set of queues to wake, given a queue for each release.
local function resolve_links(now, now_s, woken)
  if #LINKED == 0 then return end  -- the common case: no job that ended here had children
  -- per queue: ids leaving waiting, (score, id) pairs entering pending / cancelled
  local gone, to_pending, to_cancelled, pend, levels, fin = {}, {}, {}, {}, {}, {}
  local i = 1
  while i <= #LINKED do
    local pid, how = LINKED[i][1], LINKED[i][2]
    i = i + 1
    local wk = P .. ':waiters:' .. pid
    local kids = redis.call('SMEMBERS', wk)
    redis.call('DEL', wk)
    redis.call('HDEL', jk(pid), 'waiters')
    local rec_head = nil  -- the cancel's error text and record, made once per parent
    local text = nil
    if how ~= 'done' then
      if how == 'purged' then text = 'dependency_failed: job ' .. pid .. ' was purged'
      else text = 'dependency_failed: job ' .. pid .. ' ended ' .. how end
      rec_head = ',"error":' .. cjson.encode(text) .. ',"reason":"' .. DEP_FAILED
        .. '","at":' .. now_s .. ',"owner":null}'
    end
    for _, c in ipairs(kids) do
      local k = jk(c)
      local v = redis.call('HMGET', k, 'status', 'allow_failure', 'queue', 'priority',
        'run_at', 'attempt', 'unique_key', 'waiters', 'errors')
      if v[1] == 'waiting' then
        local q = v[3]
        if text == nil or v[2] == '1' then
          if redis.call('HINCRBY', k, 'waiting_on', -1) <= 0 then
            local run_at = tonumber(v[5])
            if run_at < now then
              run_at = now
              redis.call('HSET', k, 'status', 'pending', 'run_at', now_s)
            else
              redis.call('HSET', k, 'status', 'pending')
            end
            push(gone, q, c)
            push(to_pending, q, c, c)
            push(pend, q .. '\n' .. v[4], run_at, pad(c))
            levels[q .. '\n' .. v[4]] = {q, v[4]}
            woken[q] = true
          end
        else
          local rec = '{"attempt":' .. v[6] .. rec_head
          local errs = v[9]
          if not errs or errs == '[]' then errs = '[' .. rec .. ']'
          else errs = string.sub(errs, 1, -2) .. ',' .. rec .. ']' end
          redis.call('HSET', k, 'status', 'cancelled', 'finished_at', now_s, 'waiting_on', 0,
            'failure_reason', DEP_FAILED, 'errors', errs, 'last_error', text)
          -- what terminate does, with the index writes gathered
          ENDED[#ENDED + 1] = c
          push(gone, q, c)
          push(to_cancelled, q, c, c)
          fin[#fin + 1] = now
          fin[#fin + 1] = c
          release_unique(c, v[7])
          if v[8] then LINKED[#LINKED + 1] = {c, 'cancelled'} end
        end
      end
    end
  end
  LINKED = {}
  for q, ids in pairs(gone) do bulk('ZREM', P .. ':idx:' .. q .. ':waiting', ids) end
  for q, pairs_ in pairs(to_pending) do bulk('ZADD', P .. ':idx:' .. q .. ':pending', pairs_) end
  for q, pairs_ in pairs(to_cancelled) do
    bulk('ZADD', P .. ':idx:' .. q .. ':cancelled', pairs_)
  end
  if #fin > 0 then bulk('ZADD', P .. ':finished:cancelled', fin) end
  for level, pairs_ in pairs(pend) do
    local q, prio = levels[level][1], levels[level][2]
    bulk('ZADD', P .. ':pending:' .. q .. ':' .. prio, pairs_)
    redis.call('ZADD', P .. ':prios:' .. q, prio, prio)
  end
end

-- A job being deleted (prune, purge) takes its links along. As a child (has_parents: its
-- 'waiting_on' field): out of each parent's children index and waiters set, then its parents
-- list goes. As a parent (has_children: its 'children' field): its children index goes; the
-- children keep its id in their own parents list (the contract lists a parent pruned since).
-- Both flags come from the caller's HMGET: a job outside any workflow costs no call here.
local function unlink(id, has_parents, has_children)
  if has_parents then
    local pk = P .. ':parents:' .. id
    for _, p in ipairs(redis.call('LRANGE', pk, 0, -1)) do
      redis.call('ZREM', P .. ':children:' .. p, id)
      redis.call('SREM', P .. ':waiters:' .. p, id)
    end
    redis.call('DEL', pk)
  end
  if has_children then redis.call('DEL', P .. ':children:' .. id) end
end

-- The fence: (id, attempt, owner, token) and status running. The token ('<nonce>:<id>', the
-- nonce random per claim) is what an id reused after data loss cannot match. Returns the
-- job's hash values (v[14]: the 'waiters' flag, for terminate) or nil.
local function fenced(id, attempt, owner, token)
  local v = redis.call('HMGET', jk(id), 'status', 'attempt', 'locked_by', 'queue', 'priority',
    'failures', 'stall_count', 'max_attempts', 'max_stalls', 'unique_key', 'cancel_requested',
    'run_at', 'lease_token', 'waiters')
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

-- Enqueue (enqueue.lua, schedule_tick.lua): a batch of jobs given as 14 ARGV fields each from
-- index `first` on: task, payload, queue, priority, run_at|'', delay, max_attempts, max_stalls,
-- has_unique, key, has_limit_key, limit_key, allow_failure '0'|'1', after (comma-separated
-- parent ids, '' for none). One definition, so a scheduled job keeps every enqueue rule. The
-- has_* flags exist because '' is a valid key, distinct from none.
-- All or nothing: Redis never rolls a script back, so a job that fails half-way would leave
-- the jobs before it (and its own hash) behind. enqueue_check therefore checks every job of
-- the batch BEFORE the first write (the store checked them with tether._limits already; this is
-- the last line, for values only Lua sees: numbers it cannot parse, nan, inf), and so does
-- enqueue_parents for the parents named in `after`.
local ENQ_N = 14
local MAX_INT32, MAX_EPOCH, MAX_DELAY = 2147483647, 253402300799, 3155760000

local function finite(x, low, high) return x ~= nil and x == x and x >= low and x <= high end
local function whole(x, low, high) return finite(x, low, high) and math.floor(x) == x end

-- A job whose fields after its payload are the very texts of the last job checked whole passes
-- as that one did, so only its task name is looked at (an enqueue_many batch repeats its
-- options: parsing them again per job was a tenth of its server time, issue #23). Lua
-- interns strings, so comparing two equal texts is one pointer compare.
local function same_options(A, prev, i)
  for j = 2, ENQ_N - 1 do
    if A[prev + j] ~= A[i + j] then return false end
  end
  return true
end

-- nil when the batch is fine, else an error reply naming the first bad field.
local function enqueue_check(first)
  local A = ARGV  -- a local: read per field of every job
  if (#A - first + 1) % ENQ_N ~= 0 then
    return redis.error_reply('ERR enqueue: bad argument count')
  end
  local n = 0
  local prev = nil  -- the last job checked whole (and found fine)
  for i = first, #A, ENQ_N do
    n = n + 1
    local bad = nil
    if A[i] == '' then bad = 'task name'
    elseif prev and same_options(A, prev, i) then bad = nil
    elseif A[i + 2] == '' then bad = 'queue'
    elseif not whole(tonumber(A[i + 3]), -MAX_INT32 - 1, MAX_INT32) then bad = 'priority'
    elseif A[i + 4] ~= '' and not finite(tonumber(A[i + 4]), 0, MAX_EPOCH) then bad = 'run_at'
    elseif not finite(tonumber(A[i + 5]), 0, MAX_DELAY) then bad = 'delay'
    elseif not whole(tonumber(A[i + 6]), 1, MAX_INT32) then bad = 'max_attempts'
    elseif not whole(tonumber(A[i + 7]), 1, MAX_INT32) then bad = 'max_stalls'
    elseif A[i + 8] == '1' and A[i + 9] == '' then bad = 'unique_key'
    elseif A[i + 12] ~= '0' and A[i + 12] ~= '1' then bad = 'allow_failure'
    elseif string.find(A[i + 13], '[^%d,]') then bad = 'after'
    else prev = i
    end
    if bad then
      return redis.error_reply('ERR enqueue refused, nothing written: job ' .. (n - 1)
        .. ' of the batch: bad ' .. bad)
    end
  end
  return nil
end

-- The status of every parent the batch names in `after`, read before the first write:
-- returns the table parent id -> status, or nil and the first unknown id (the caller then
-- writes nothing and answers JobNotFound for it). Jobs of the same batch do not exist yet, so
-- they never count as parents. Each distinct parent is read once (a chord's callback over
-- 10,000 parents is 10,000 HGETs). The statuses stay true for the whole insert: inserting
-- jobs changes no existing job's status.
local function enqueue_parents(first)
  local pstat = {}
  for i = first, #ARGV, ENQ_N do
    for p in string.gmatch(ARGV[i + 13], '%d+') do
      if pstat[p] == nil then
        local st = redis.call('HGET', jk(p), 'status')
        if not st then return nil, p end
        pstat[p] = st
      end
    end
  end
  return pstat
end

-- A job's links at insert (invariant 6): its distinct parents in `after` order, the set of
-- those not terminal (its links left to resolve) and their number, and the first parent that
-- failed or was cancelled (unless allow_failure: then such a parent counts as resolved, like
-- a done one).
local function enqueue_links(after, allow, pstat)
  local parents, open, nopen, failed_by, seen = {}, {}, 0, nil, {}
  for p in string.gmatch(after, '%d+') do
    if not seen[p] then
      seen[p] = true
      parents[#parents + 1] = p
      local st = pstat[p]
      if st == 'failed' or st == 'cancelled' then
        if not allow and not failed_by then failed_by = p end
      elseif st ~= 'done' then
        open[p] = true
        nopen = nopen + 1
      end
    end
  end
  return parents, open, nopen, failed_by
end

-- Write the links of job `id` (enqueued with `after`, see enqueue_links): its parents list
-- now (RPUSH in slices: unpack has a C-stack limit); its place in each parent's children
-- index, and while it waits in the waiters set of each parent not terminal yet, gathered in
-- acc and written by link_flush once per parent for the whole batch (a fan-out of 10,000
-- children in one batch is then a few calls per parent, not three per child).
local function enqueue_link(acc, id, parents, open, waiting)
  bulk('RPUSH', P .. ':parents:' .. id, parents)
  for _, p in ipairs(parents) do
    push(acc.children, p, id, id)
    if waiting and open[p] then push(acc.waiters, p, id) end
  end
end

-- The gathered links, with the flags on each parent's hash that make its end (waiters) and
-- its prune (children) look at these keys.
local function link_flush(acc)
  for p, pairs_ in pairs(acc.children) do
    bulk('ZADD', P .. ':children:' .. p, pairs_)
    if acc.waiters[p] then
      bulk('SADD', P .. ':waiters:' .. p, acc.waiters[p])
      redis.call('HSET', jk(p), 'children', 1, 'waiters', 1)
    else
      redis.call('HSET', jk(p), 'children', 1)
    end
  end
end

-- Insert the (checked) batch; a unique_key hit yields the live holder's id (first occurrence in
-- the batch wins because the key is recorded as soon as its job is inserted) and links nothing.
-- Returns the ids in input order and the set of queues to wake. pstat: enqueue_parents'.
-- uid: never reused, unlike the id (a restart without persistence or a failover to a replica
-- that lagged starts the counter again). SHA-1 of the server's own microsecond clock, the id
-- and the prefix: the same id handed out again comes at another microsecond, and no argument
-- is added. t: the clock's TIME reply when the script's time came from the server (clock's
-- third value), so the salt costs no second TIME; nil when the caller gave the time (tests):
-- the salt then still reads the server's clock, so a given `now` never repeats a uid.
-- A job with `after` starts (invariant 6) pending when every parent resolved already,
-- cancelled (dependency_failed, terminal at once: it holds no unique key) when one failed,
-- else waiting: in its status index only, never in a pending zset, so no claim can see it.
-- Cost per job: one HSET of all its fields. The ids are INCR's: last + 1 each, in input
-- order, all inside this atomic script. A batch without unique keys takes exactly one id per
-- job, so ONE INCRBY of the batch's size reserves them up front; only a batch that may reuse
-- a live holder's id (a unique key) reads the counter once and writes it once. The index
-- writes of the batch (P:queues, pending zsets and levels, status indexes) are gathered and
-- made once per key at the end: enqueue_many of 10,000 jobs was six calls per job. Nothing
-- in this script reads those indexes before they are written. A batch of one job (every
-- task.enqueue) writes them directly: gathering them costs more tables than it saves calls.
-- Server time (issue #23): redis.call turns every Lua number argument into text with
-- snprintf('%.17g'), which costs about what a short command does, so constant values go as
-- strings ('0') and a computed run_at as the text it is stored with (fmt, the same %.17g).
-- The hash's field list is made once per batch and only its per-job slots rewritten.
local function enqueue_insert(first, now, now_s, pstat, t)
  local A = ARGV  -- a local: read per field of every job
  local out, woken, acc = {}, {}, {children = {}, waiters = {}}
  t = t or redis.call('TIME')
  local salt = P .. ':' .. t[1] .. '.' .. t[2] .. ':'
  local njobs = (#A - first + 1) / ENQ_N
  local one = njobs == 1
  local counted = true  -- every job takes an id: no unique key in the batch
  for i = first + 8, #A, ENQ_N do
    if A[i] == '1' then
      counted = false
      break
    end
  end
  local last
  if counted then
    last = redis.call('INCRBY', P .. ':ids', string.format('%d', njobs)) - njobs
  else
    last = tonumber(redis.call('GET', P .. ':ids') or '0')
  end
  local first_last = last
  local queues, pend, levels, idx_in = {}, {}, {}, {}
  local delay_s, delay_at, delay_at_s  -- the last delay's text and its run_at (number, text)
  -- the HSET's field/value list; slots 2, 4, ..., 34 change per job, 35 on are the optional
  -- fields (nf: how many of the list this job's HSET sends)
  local fields = {'id', '', 'task', '', 'queue', '', 'payload', '', 'status', '', 'priority', '',
    'run_at', '', 'attempt', '0', 'max_attempts', '', 'failures', '0', 'stall_count', '0',
    'max_stalls', '', 'interruptions', '0', 'created_at', now_s, 'cancel_requested', '0',
    'errors', '[]', 'uid', ''}
  for i = first, #A, ENQ_N do
    local task, payload, q, prio = A[i], A[i + 1], A[i + 2], A[i + 3]
    local ukey = nil
    if A[i + 8] == '1' then ukey = A[i + 9] end
    local existing = nil
    if ukey then
      existing = redis.call('HGET', P .. ':unique', ukey)
      if existing then
        local st = redis.call('HGET', jk(existing), 'status')
        if st ~= 'pending' and st ~= 'running' and st ~= 'waiting' then existing = nil end
      end
    end
    if existing then
      out[#out + 1] = tonumber(existing)
    else
      local status, parents, open, nopen, failed_by = 'pending', nil, nil, 0, nil
      if A[i + 13] ~= '' then
        parents, open, nopen, failed_by = enqueue_links(A[i + 13], A[i + 12] == '1',
          pstat)
        if failed_by then status = 'cancelled' elseif nopen > 0 then status = 'waiting' end
      end
      last = last + 1
      local id = string.format('%d', last)
      -- score: the pending zset's; the stored text when computed (fmt: what Redis would
      -- make of the number), the number when given (Redis formats it, as it always did)
      local run_at, run_at_s, score
      if A[i + 4] ~= '' then
        run_at, run_at_s = tonumber(A[i + 4]), A[i + 4]
        score = run_at
      else
        -- a batch's jobs share their delay: the sum and its text are made once
        if A[i + 5] ~= delay_s then
          delay_s = A[i + 5]
          delay_at = now + tonumber(delay_s)
          delay_at_s = fmt(delay_at)
        end
        run_at, run_at_s = delay_at, delay_at_s
        score = run_at_s
      end
      local k = jk(id)
      fields[2], fields[4], fields[6], fields[8] = id, task, q, payload
      fields[10], fields[12], fields[14] = status, prio, run_at_s
      fields[18], fields[24] = A[i + 6], A[i + 7]
      fields[34] = string.sub(redis.sha1hex(salt .. id), 1, 32)
      local nf = 34
      -- limit_key (issue 19): absent field = None; '' is a key of its own, so the flag decides
      if A[i + 10] == '1' then
        fields[nf + 1], fields[nf + 2] = 'limit_key', A[i + 11]
        nf = nf + 2
      end
      if ukey then
        fields[nf + 1], fields[nf + 2] = 'unique_key', ukey
        nf = nf + 2
      end
      if parents then
        -- waiting_on marks a job with parents (prune and purge unlink it by this field)
        fields[nf + 1], fields[nf + 2] = 'waiting_on', status == 'waiting' and nopen or '0'
        nf = nf + 2
        if A[i + 12] == '1' then
          fields[nf + 1], fields[nf + 2] = 'allow_failure', '1'
          nf = nf + 2
        end
      end
      redis.call('HSET', k, unpack(fields, 1, nf))
      -- a live job holds its key; one cancelled at insert never does
      if ukey and status ~= 'cancelled' then redis.call('HSET', P .. ':unique', ukey, id) end
      if one then
        redis.call('SADD', P .. ':queues', q)
      else
        queues[q] = true
      end
      if parents then enqueue_link(acc, id, parents, open, status == 'waiting') end
      if status == 'pending' then
        if one then
          redis.call('ZADD', P .. ':pending:' .. q .. ':' .. prio, score, pad(last))
          redis.call('ZADD', P .. ':prios:' .. q, prio, prio)
          redis.call('ZADD', P .. ':idx:' .. q .. ':pending', id, id)
        else
          local lk = q .. '\n' .. prio
          if not levels[lk] then levels[lk] = {q, prio} end
          push(pend, lk, score, pad(last))
          push(idx_in, P .. ':idx:' .. q .. ':pending', id, id)
        end
        woken[q] = true
      elseif status == 'waiting' then
        if one then
          redis.call('ZADD', P .. ':idx:' .. q .. ':waiting', id, id)
        else
          push(idx_in, P .. ':idx:' .. q .. ':waiting', id, id)
        end
      else
        -- ended before it began: the shape every dependency cancel has (resolve_links)
        redis.call('HSET', k, 'failure_reason', DEP_FAILED)
        add_error(id, 0, 'dependency_failed: job ' .. failed_by .. ' ended '
          .. pstat[failed_by], DEP_FAILED, now_s, nil)
        terminate(id, q, nil, 'cancelled', now, now_s, nil, nil)
      end
      out[#out + 1] = last
    end
  end
  -- the gathered writes, one call per key (add_pending and move_idx for the whole batch)
  if not counted and last ~= first_last then
    redis.call('SET', P .. ':ids', string.format('%d', last))
  end
  local names = {}
  for q in pairs(queues) do names[#names + 1] = q end
  if #names > 0 then bulk('SADD', P .. ':queues', names) end
  for lk, pairs_ in pairs(pend) do
    local q, prio = levels[lk][1], levels[lk][2]
    bulk('ZADD', P .. ':pending:' .. q .. ':' .. prio, pairs_)
    redis.call('ZADD', P .. ':prios:' .. q, prio, prio)
  end
  for key, pairs_ in pairs(idx_in) do bulk('ZADD', key, pairs_) end
  link_flush(acc)
  return out, woken
end

-- The claim's reply (claim.lua, claim_flow.lua and their replays alike): ONE flat array, per
-- job CLAIM_ROW values in this order (rows.CLAIM_ROW in Python must match):
--   lease_until, started_at, cancel_requested, then the hash fields of CLAIM_READ but status.
-- Why flat and positional: the reply was one HGETALL map per job, names and values, that the
-- worker turned into a dict before reading it; the fields the claim itself writes (status,
-- locked_by, lease_token: the worker knows them) are not sent at all, and attempt is sent as
-- written. Absent fields come back false, which Redis sends as nil. (HGETALL folded into a
-- table in Lua costs the server as much as this HMGET: measured with callgrind, not kept.)
local CLAIM_READ = {'status', 'id', 'task', 'queue', 'payload', 'priority', 'run_at', 'attempt',
  'max_attempts', 'failures', 'stall_count', 'max_stalls', 'interruptions', 'created_at',
  'finished_at', 'last_error', 'failure_reason', 'result', 'checkpoint', 'progress',
  'unique_key', 'errors', 'uid', 'limit_key', 'snoozes'}
local CLAIM_ATTEMPT = 8  -- position of 'attempt' in CLAIM_READ

-- Append one job's row to out: the three claim values, then v[2..] (v: HMGET of CLAIM_READ).
local function claim_row(out, v, lease_s, started_s, cancel)
  local n = #out
  out[n + 1], out[n + 2], out[n + 3] = lease_s, started_s, cancel
  n = n + 3
  for j = 2, #CLAIM_READ do out[n + j - 1] = v[j] end
end

-- Grant the lease on job `id` if its hash says pending: one HMGET (status and the reply's
-- fields) and one HSET of what the claim changes, attempt + 1 included (read just above, in
-- the same atomic script, so it is HINCRBY's value). Returns the status it found (false: the
-- hash is gone); the caller moves the indexes (claim.lua in bulk, claim_flow.lua per job).
-- cancel_requested goes as the text '0': redis.call would format the number 0 with %.17g on
-- every claim (issue #23); the stored text is the same.
local function grant(out, id, owner, lease_s, now_s, nonce)
  local k = jk(id)
  local v = redis.call('HMGET', k, unpack(CLAIM_READ))
  if v[1] ~= 'pending' then return v[1] end
  local attempt = string.format('%d', tonumber(v[CLAIM_ATTEMPT]) + 1)
  v[CLAIM_ATTEMPT] = attempt
  redis.call('HSET', k, 'status', 'running', 'attempt', attempt, 'locked_by', owner,
    'lease_until', lease_s, 'started_at', now_s, 'cancel_requested', '0',
    'lease_token', nonce .. ':' .. id, 'lease_owner', owner)
  claim_row(out, v, lease_s, now_s, '0')
  return 'pending'
end

-- A claim repeated with its request id (its reply was lost): the jobs of the recorded claim
-- still running under its token and owner (in claim_row's shape, their lease as renewed
-- since), or nil when no claim with that nonce was recorded. Shared by claim.lua and
-- claim_flow.lua, so both answer replays alike.
local function claimed_before(nonce, owner)
  local seen = req_get('claim', nonce)
  if not seen then return nil end
  local out = {}
  for _, id in ipairs(split_ids(seen)) do
    local sid = string.format('%d', id)
    local v = redis.call('HMGET', jk(sid), 'status', 'locked_by', 'lease_token', 'lease_until',
      'started_at', 'cancel_requested')
    if v[1] == 'running' and v[2] == owner and v[3] == nonce .. ':' .. sid then
      claim_row(out, redis.call('HMGET', jk(sid), unpack(CLAIM_READ)), v[4], v[5], v[6])
    end
  end
  return out
end
