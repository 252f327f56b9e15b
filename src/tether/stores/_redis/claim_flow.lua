-- claim_flow(batch, limits): the claim under fleet-wide flow limits (issue 19; the rules are
-- Leases.claim's in tether/stores/_roles.py). claim.lua stays the fast path for a claim
-- without limits; this script is its twin with three additions, all in the same atomic
-- script, so two limited claims never both take a group's last slot:
--  * Slots are the running jobs themselves: at the start we read P:running (every job with
--    status running, lease expired or not; bounded by the fleet's slots) and count them per
--    concurrency group from their hashes. No counter exists, so none can leak: a slot frees
--    exactly when its job leaves running (finish, cancel, reap) and a fenced-out zombie frees
--    nothing, because it changes nothing.
--  * Rate windows: P:flow:starts:<group> is a zset of the starts of one rate-limited group,
--    scored by the claim's now; a claim counts (now - per, now], drops what is older than the
--    window and records one start per job taken in each rate group that applies to it.
--  * Skipping and rotation: per queue, the due pending entries are walked in (priority,
--    run_at, id) order in pages (growing to PAGE), at most `scan` (FLOW_SCAN in lease.py:
--    20,000) entries per queue. A job's rank is its position among the walked jobs of its
--    (task, limit_key) in that queue (1 without a key); jobs whose group is already full are
--    skipped (not kept), the others are ordered by (priority, rank, run_at, id) and taken
--    greedily while every limit that applies still has room (taken in this claim counted).
--    A queue's walk stops early once what it walked is sure to fill the claim (enough()).
--    Jobs beyond the bound are not seen by this claim: documented in docs/stores.md.
--  Cost: one HMGET per running job (concurrency limits only) and per walked entry; a queue
--  of unkeyed jobs stops after its first page, a keyed or blocked backlog is walked to the
--  bound (~2.5 us per entry, measured: 10,000 blocked jobs ~25 ms, Redis busy meanwhile).
-- Replays: exactly claim.lua's (P:req:claim:<nonce>); a replay records no start.
-- ARGV: P, now|'', owner, limit, lease_ttl, nonce, rec_ttl_ms, scan, nflow, then nflow times
--   (scope, name, concurrency|'', rate|'', per, per_key '0'|'1'), then queue...
-- Returns the claimed jobs in claim order, in claim_row's flat shape (_lib.lua).
local now, now_s = clock(ARGV[2])
local owner, limit, ttl = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local nonce, rec_ttl, scan = ARGV[6], ARGV[7], tonumber(ARGV[8])
local PAGE = 1000

-- A replay answers from the record, like claim.lua: the jobs still running under its token.
local replayed = claimed_before(nonce, owner)
if replayed then return replayed end
room()  -- at the memory limit, fail here before the first write (_lib.lua)

-- The limits, parsed once. any_conc: whether the running set must be read at all.
local nflow = tonumber(ARGV[9])
local flows, any_conc = {}, false
for f = 0, nflow - 1 do
  local b = 10 + f * 6
  local l = {scope = ARGV[b], name = ARGV[b + 1], conc = tonumber(ARGV[b + 2]),
    rate = tonumber(ARGV[b + 3]), per = tonumber(ARGV[b + 4]), per_key = ARGV[b + 5] == '1'}
  if l.conc then any_conc = true end
  flows[#flows + 1] = l
end
local first_queue = 10 + nflow * 6

-- FlowLimit.group and FlowLimit.applies (tether/stores/_records.py), to the byte: the group
-- name is the rate log's key, shared with every other store's claimers of this prefix.
local function group(l, key)
  local base = l.scope .. '\31' .. l.name
  if not l.per_key then return base end
  if not key then return base .. '\31' end
  return base .. '\31=' .. key
end
local function applies(l, task, q)
  if l.scope == 'task' then return l.name == task end
  return l.name == q
end

-- running(g): every job in P:running whose hash says running, counted in each concurrency
-- group it belongs to. A stray entry (hash gone or not running) holds no slot.
local running = {}
if any_conc then
  local ids = redis.call('ZRANGE', P .. ':running', 0, -1)
  for _, id in ipairs(ids) do
    local v = redis.call('HMGET', jk(id), 'status', 'task', 'queue', 'limit_key')
    if v[1] == 'running' then
      for _, l in ipairs(flows) do
        if l.conc and applies(l, v[2], v[3]) then
          local g = group(l, v[4])
          running[g] = (running[g] or 0) + 1
        end
      end
    end
  end
end

-- started(g): the recorded starts in (now - per, now], read once per (group, window).
local started = {}
local function starts(g, per)
  local ck = g .. '\n' .. per
  local n = started[ck]
  if n == nil then
    n = redis.call('ZCOUNT', P .. ':flow:starts:' .. g, '(' .. fmt(now - per), now_s)
    started[ck] = n
  end
  return n
end

-- Whether job (task, q, key) has room in every limit that applies, with `taken` jobs of
-- this claim counted (an empty table for the pre-filter while walking).
local function fits(task, q, key, taken)
  for _, l in ipairs(flows) do
    if (l.conc or l.rate) and applies(l, task, q) then
      local g = group(l, key)
      local t = taken[g] or 0
      if l.conc and (running[g] or 0) + t >= l.conc then return false end
      if l.rate and starts(g, l.per) + t >= l.rate then return false end
    end
  end
  return true
end

-- The order among eligible jobs: (priority, rank, run_at, id).
local function before(a, b)
  if a[1] ~= b[1] then return a[1] < b[1] end
  if a[2] ~= b[2] then return a[2] < b[2] end
  if a[3] ~= b[3] then return a[3] < b[3] end
  return a[4] < b[4]
end

-- Count a take in every group of every limit that applies to the job.
local function take(task, q, key, taken)
  for _, l in ipairs(flows) do
    if (l.conc or l.rate) and applies(l, task, q) then
      local g = group(l, key)
      taken[g] = (taken[g] or 0) + 1
    end
  end
end

-- Whether a queue's walk may stop: the jobs of it walked so far that sort before every job
-- not walked yet (earlier levels, and rank-1 jobs of the current level: an unwalked job may
-- still be the first of its key) already fill the claim when taken greedily. Why it is safe:
-- the final greedy pass meets those jobs first, in the same order, so it never reaches an
-- unwalked one. This stops a claim of unkeyed jobs after its first page; a keyed backlog is
-- walked to the bound, since any key's first job may still be ahead.
local function enough(qc, p_cur)
  local s = {}
  for _, c in ipairs(qc) do
    if c[1] < p_cur or c[2] == 1 then s[#s + 1] = c end
  end
  if #s < limit then return false end
  table.sort(s, before)
  local t, n = {}, 0
  for _, c in ipairs(s) do
    if fits(c[7], c[5], c[8], t) then
      take(c[7], c[5], c[8], t)
      n = n + 1
      if n >= limit then return true end
    end
  end
  return false
end

-- The walk: per queue, levels in ascending priority, due entries in pages (small first, so
-- a claim that fills at once reads little), at most `scan` per queue. Candidates: {prio,
-- rank, run_at, id, q, prio_text, task, key}. Entries whose hash is gone or not pending are
-- strays, dropped after the walk like claim.lua drops them.
local cands, strays = {}, {}
local empty = {}
for i = first_queue, #ARGV do
  local q = ARGV[i]
  local walked, page, stop = 0, math.min(PAGE, math.max(32, 2 * limit)), false
  local qc = {}
  local ranks = {}  -- (task, key) -> jobs of it walked so far in this queue
  local levels = redis.call('ZRANGE', P .. ':prios:' .. q, 0, -1)
  for _, prio in ipairs(levels) do
    if walked >= scan or stop then break end
    local zk = P .. ':pending:' .. q .. ':' .. prio
    local offset = 0
    while walked < scan do
      local n = math.min(page, scan - walked)
      page = math.min(PAGE, page * 2)
      local due = redis.call('ZRANGEBYSCORE', zk, '-inf', now_s, 'WITHSCORES', 'LIMIT', offset, n)
      for j = 1, #due, 2 do
        local id = string.format('%d', tonumber(due[j]))
        local v = redis.call('HMGET', jk(id), 'status', 'task', 'limit_key')
        if v[1] ~= 'pending' then
          strays[#strays + 1] = {id, q, prio, v[1]}
        else
          -- rank counts every due job of the (task, key), eligible or not (the contract)
          local rank = 1
          if v[3] then
            local rk = v[2] .. '\31' .. v[3]
            rank = (ranks[rk] or 0) + 1
            ranks[rk] = rank
          end
          -- a job whose group is full before this claim takes anything is never taken:
          -- not kept, so a blocked backlog costs the walk only
          if fits(v[2], q, v[3], empty) then
            qc[#qc + 1] = {tonumber(prio), rank, tonumber(due[j + 1]), tonumber(id), q,
              prio, v[2], v[3]}
          end
        end
      end
      walked = walked + #due / 2
      offset = offset + #due / 2
      if enough(qc, tonumber(prio)) then
        stop = true
        break
      end
      if #due / 2 < n then break end  -- this level has no more due entries
    end
  end
  for _, c in ipairs(qc) do cands[#cands + 1] = c end
end
table.sort(cands, before)

-- Drop the strays (claim.lua's rule): their entries go, a missing hash is counted.
local missing = 0
for _, s in ipairs(strays) do
  remove_pending(s[1], s[2], s[3])
  if not s[4] then
    redis.call('ZREM', P .. ':idx:' .. s[2] .. ':pending', s[1])
    missing = missing + 1
  end
end
if missing > 0 then redis.call('HINCRBY', P .. ':incidents', 'missing_jobs', missing) end

-- Take greedily: a candidate is taken while every limit that applies has room with the
-- jobs taken so far counted; each take counts in all its groups (concurrency and rate).
local lease_until = now + ttl
local lease_s = fmt(lease_until)
local taken, out, ids = {}, {}, {}
local windows = {}  -- rate group -> longest window among the limits naming it
for _, c in ipairs(cands) do
  if #ids >= limit then break end
  local task, q, key = c[7], c[5], c[8]
  if fits(task, q, key, taken) then
    local id = string.format('%d', c[4])
    take(task, q, key, taken)
    for _, l in ipairs(flows) do
      if l.rate and applies(l, task, q) then
        -- one start per job, per rate group (a group named by two limits records once)
        local g = group(l, key)
        if windows[g] == nil then windows[g] = {per = l.per, ids = {}} end
        if l.per > windows[g].per then windows[g].per = l.per end
        windows[g].ids[id] = true
      end
    end
    -- the same grant as claim.lua (the walk saw the hash pending, in this same script)
    remove_pending(id, q, c[6])
    move_idx(id, q, 'pending', 'running')
    redis.call('ZADD', P .. ':running', lease_until, id)
    grant(out, id, owner, lease_s, now_s, nonce)
    ids[#ids + 1] = c[4]
  end
end

-- Record the starts: member '<nonce>:<id>' is unique per grant (a replay records nothing);
-- entries at or before now - per can never count again and go; the key expires one window
-- (plus a second) after its last start, so an idle group leaves nothing behind.
for g, w in pairs(windows) do
  local sk = P .. ':flow:starts:' .. g
  local args = {}
  for id in pairs(w.ids) do
    args[#args + 1] = now_s
    args[#args + 1] = nonce .. ':' .. id
    -- in chunks: unpack of a huge claim would overflow Lua's C stack
    if #args >= 1000 then
      redis.call('ZADD', sk, unpack(args))
      args = {}
    end
  end
  if #args > 0 then redis.call('ZADD', sk, unpack(args)) end
  redis.call('ZREMRANGEBYSCORE', sk, '-inf', fmt(now - w.per))
  redis.call('PEXPIRE', sk, math.ceil(w.per * 1000) + 1000)
end

-- Only a claim that granted something is recorded (claim.lua's reason).
if #ids > 0 then req_put('claim', nonce, join_ids(ids), rec_ttl) end
return out
