-- enqueue(batch): one script for the whole batch so ids, the unique index, the pending
-- indexes and the workflow links move together (enqueue_check / enqueue_parents /
-- enqueue_insert in _lib.lua, shared with schedule_tick.lua): every job and every parent it
-- names is checked before the first write, so a batch is all or nothing.
-- Parents (invariant 6): an id in `after` that names no job refuses the batch whole; the reply
-- is then {'unknown_parent', id} (JobNotFound for the caller; nothing written, not even the
-- request record, so a repeat is refused the same way). A job is inserted pending, waiting or
-- cancelled by its parents' statuses read in this same script: no finish can slip between
-- that read and the link it decides.
-- Replays: with a request id, the ids are stored under P:req:enqueue:<rid> in this same
-- script; a repeat of the call answers from it and inserts nothing.
-- ARGV: P, now|'', rid|'', rid_ttl_ms, then per job the 14 fields of enqueue_check.
-- Returns the ids in input order (integers). A job cancelled at insert (a parent failed) is
-- published on P:done (announce).
-- t: TIME's reply when the time is the server's; enqueue_insert salts the uids with it (one
-- TIME per call, not two)
local now, now_s, t = clock(ARGV[2])
local rid, rid_ttl = ARGV[3], ARGV[4]
local seen = req_get('enqueue', rid)
if seen then return split_ids(seen) end
room()  -- at the memory limit, fail here before the first write (_lib.lua)
local bad = enqueue_check(5)
if bad then return bad end
local pstat, unknown = enqueue_parents(5)
if unknown then return {'unknown_parent', unknown} end
local out, woken = enqueue_insert(5, now, now_s, pstat, t)
req_put('enqueue', rid, join_ids(out), rid_ttl)
wake(woken)
announce()
return out
