-- job_links: a job's place in a workflow (issue 20), read in one script so the hash fields,
-- the parents list and the children index are one consistent snapshot (key layout: the
-- workflow part of _lib.lua). Writes nothing.
-- waiting_on is reported only while the job waits (the field keeps its last count otherwise:
-- the contract says 0 unless waiting).
-- ARGV: P, id
-- Returns {} for an unknown id, else {waiting_on, allow_failure '0'|'1', parents (in `after`
-- order), children (ascending ids)}.
local v = redis.call('HMGET', jk(ARGV[2]), 'id', 'status', 'waiting_on', 'allow_failure')
if not v[1] then return {} end
local waiting_on = 0
if v[2] == 'waiting' then waiting_on = tonumber(v[3]) or 0 end
return {waiting_on, v[4] == '1' and 1 or 0,
  redis.call('LRANGE', P .. ':parents:' .. ARGV[2], 0, -1),
  redis.call('ZRANGE', P .. ':children:' .. ARGV[2], 0, -1)}
