-- cancel: decide on the job's current status inside the script so a concurrent claim cannot
-- slip between the read and the write. pending -> cancelled now (leaves the pending indexes,
-- frees its unique key); waiting (a workflow child, issue 20) -> cancelled now likewise (it
-- is in no pending zset; reason None, as any explicit cancel; its links from parents that
-- have not ended stay in their waiters sets and resolve as no-ops); running ->
-- cancel_requested = 1 (the holder learns it from its next heartbeat; the request sticks
-- however the attempt ends, see finish.lua and reap.lua); terminal -> untouched.
-- A cancel requested here publishes the holder's id on P:signal, so its heartbeat comes now
-- rather than at its interval (wait_for_signal, issue 22; the heartbeat still decides).
-- A job cancelled here cancels its waiting children (dependency_failed, transitively) in this
-- same script (invariant 6; resolve_links, _lib.lua).
-- Replays: the answer is recorded under P:req:cancel:<rid>, so a repeat whose first reply was
-- lost says "cancelled" again rather than "finished".
-- A job cancelled here is published on P:done (announce, _lib.lua).
-- ARGV: P, now|'', rid|'', rid_ttl_ms, id
-- Returns 0 unknown id, 1 cancelled, 2 requested, 3 already finished.
local now, now_s = clock(ARGV[2])
local rid, rid_ttl = ARGV[3], ARGV[4]
local seen = req_get('cancel', rid)
if seen then return tonumber(seen) end
room()  -- at the memory limit, fail here before the first write (_lib.lua)
local id = ARGV[5]
local v = redis.call('HMGET', jk(id), 'status', 'queue', 'priority', 'unique_key', 'waiters',
                     'locked_by')
local code = 3
local woken = {}
if not v[1] then
  code = 0
elseif v[1] == 'pending' then
  remove_pending(id, v[2], v[3])
  terminate(id, v[2], 'pending', 'cancelled', now, now_s, v[4], v[5])
  code = 1
elseif v[1] == 'waiting' then
  -- waiting_on 0: no longer waiting on anything (job_links)
  redis.call('HSET', jk(id), 'waiting_on', 0)
  terminate(id, v[2], 'waiting', 'cancelled', now, now_s, v[4], v[5])
  code = 1
elseif v[1] == 'running' then
  redis.call('HSET', jk(id), 'cancel_requested', 1)
  if v[6] then redis.call('PUBLISH', P .. ':signal', v[6]) end
  code = 2
end
if code ~= 0 then req_put('cancel', rid, code, rid_ttl) end
resolve_links(now, now_s, woken)  -- a no-op unless the cancelled job had waiting children
wake(woken)
announce()
return code
