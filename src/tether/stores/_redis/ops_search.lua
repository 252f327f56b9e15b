-- ops_search: jobs matching a filter, newest (or oldest) first, keyset paginated by id.
-- Candidates come from the (queue, status) index zsets scored by id, one bounded range read
-- each beyond the cursor, merged by id; task and since are checked on the job hash. At most
-- `budget` hashes are examined per call, so a rare filter never blocks Redis for long: the
-- script then returns the id it stopped at and the caller continues from there.
-- ARGV: P, status|'', queue|'', task|'', since|'', cursor|'', limit, desc '1'|'0', budget
-- Returns {jobs (HGETALL arrays), next cursor or ''}.
local statuses = {'waiting', 'pending', 'running', 'done', 'failed', 'cancelled'}
if ARGV[2] ~= '' then statuses = {ARGV[2]} end
local queues
if ARGV[3] ~= '' then queues = {ARGV[3]} else queues = redis.call('SMEMBERS', P .. ':queues') end
local task, since = ARGV[4], tonumber(ARGV[5])
local cursor = ARGV[6]
local limit, desc, budget = tonumber(ARGV[7]), ARGV[8] == '1', tonumber(ARGV[9])
local filtered = task ~= '' or since ~= nil
local batch = filtered and math.max(limit, 200) or limit
local out, examined = {}, 0
while true do
  local ids = {}
  for _, q in ipairs(queues) do
    for _, st in ipairs(statuses) do
      local k = P .. ':idx:' .. q .. ':' .. st
      local got
      if desc then
        got = redis.call('ZREVRANGEBYSCORE', k, cursor == '' and '+inf' or '(' .. cursor,
          '-inf', 'LIMIT', 0, batch)
      else
        got = redis.call('ZRANGEBYSCORE', k, cursor == '' and '-inf' or '(' .. cursor,
          '+inf', 'LIMIT', 0, batch)
      end
      for _, id in ipairs(got) do ids[#ids + 1] = tonumber(id) end
    end
  end
  if #ids == 0 then return {out, ''} end
  if desc then table.sort(ids, function(a, b) return a > b end) else table.sort(ids) end
  for n = 1, math.min(batch, #ids) do
    local id = ids[n]
    cursor = tostring(id)
    examined = examined + 1
    local ok = true
    if filtered then
      local v = redis.call('HMGET', jk(id), 'task', 'created_at')
      if task ~= '' and v[1] ~= task then ok = false end
      if ok and since ~= nil and (tonumber(v[2]) or 0) < since then ok = false end
    end
    if ok then
      -- a job whose hash is gone (evicted, deleted by hand) or half there is left out
      local h = redis.call('HGETALL', jk(id))
      if redis.call('HEXISTS', jk(id), 'id') == 1 then out[#out + 1] = h end
      if #out >= limit then return {out, ''} end
    end
  end
  if examined >= budget then return {out, cursor} end
end
