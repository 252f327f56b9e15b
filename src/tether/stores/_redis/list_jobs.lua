-- list_jobs: keyset pagination in id order. Every (queue, status) pair has an index zset
-- scored by id, so each needed pair is one range read of ids > after_id (at most `limit`),
-- the candidates are merged by id and the first `limit` hashes returned, all in one
-- consistent snapshot. No SCAN: the known queues come from the queues set.
-- ARGV: P, status|'', queue|'', after_id, limit
-- Returns one HGETALL array per job.
local statuses = {'waiting', 'pending', 'running', 'done', 'failed', 'cancelled'}
if ARGV[2] ~= '' then statuses = {ARGV[2]} end
local queues
if ARGV[3] ~= '' then queues = {ARGV[3]} else queues = redis.call('SMEMBERS', P .. ':queues') end
local limit = tonumber(ARGV[5])
local ids = {}
for _, q in ipairs(queues) do
  for _, st in ipairs(statuses) do
    local got = redis.call('ZRANGEBYSCORE', P .. ':idx:' .. q .. ':' .. st, '(' .. ARGV[4],
      '+inf', 'LIMIT', 0, limit)
    for _, id in ipairs(got) do ids[#ids + 1] = tonumber(id) end
  end
end
table.sort(ids)
-- A job whose hash is gone (evicted, deleted by hand) or half there (no id field) is left
-- out: one broken job must not make every listing of the others fail.
local out = {}
for n = 1, #ids do
  if #out >= limit then break end
  local h = redis.call('HGETALL', jk(ids[n]))
  for i = 1, #h, 2 do
    if h[i] == 'id' then
      out[#out + 1] = h
      break
    end
  end
end
return out
