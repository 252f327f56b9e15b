-- schedule_tick(name, tick, job|none): record the tick of a periodic schedule and enqueue its
-- job, in this ONE script (Redis runs scripts one at a time: atomic), iff no tick >= it is
-- recorded. A second leader, a paused one waking late, or redis-py replaying the script after
-- a lost reply finds the tick taken and writes nothing, so a (schedule, tick) gets one job.
-- The job goes through enqueue_check / enqueue_insert (_lib.lua): enqueue's own rules.
-- Keys: P:schedule:<name> hash {last_tick (the caller's text: exact), last_job_id,
-- updated_at, spec}, P:schedules set of names. spec: the schedule's fingerprint when its
-- latest tick was recorded, kept in this never-pruned hash so a later leader can tell a
-- deploy changed the schedule even once the pruner removed its last job.
-- ARGV: P, now|'', name, tick, spec ('' keeps the recorded one, else '=' .. spec), then 0 or
-- 14 job fields (see enqueue_check).
-- Returns the job id, or -1 when the tick was taken already / a skip was recorded.
local now, now_s, t = clock(ARGV[2])  -- t: the uids' salt (enqueue_insert)
room()  -- at the memory limit, fail here before the first write (_lib.lua)
local name, tick, spec = ARGV[3], ARGV[4], ARGV[5]
local has_job = #ARGV > 5
local pstat = {}
if has_job then
  local bad = enqueue_check(6)
  if bad then return bad end
  -- a scheduled job names no parents today; if it ever does, the same rule: refused whole
  local unknown
  pstat, unknown = enqueue_parents(6)
  if unknown then return redis.error_reply('ERR schedule_tick: unknown parent job ' .. unknown) end
end
local k = P .. ':schedule:' .. name
local last = redis.call('HGET', k, 'last_tick')
if last and tonumber(last) >= tonumber(tick) then return -1 end
redis.call('SADD', P .. ':schedules', name)
redis.call('HSET', k, 'last_tick', tick, 'updated_at', now_s)
-- the spec rides with the tick it was recorded with (same script, so the two never disagree)
if spec ~= '' then redis.call('HSET', k, 'spec', string.sub(spec, 2)) end
if not has_job then return -1 end
local out, woken = enqueue_insert(6, now, now_s, pstat, t)
redis.call('HSET', k, 'last_job_id', out[1])
wake(woken)
announce()  -- no-op unless the job was cancelled at insert (a parent failed)
return out[1]
