-- enqueue(batch): one script for the whole batch so ids, the unique index and the pending
-- indexes move together (enqueue_check / enqueue_insert in _lib.lua, shared with
-- schedule_tick.lua): every job is checked before the first write, so a batch is all or nothing.
-- Replays: with a request id, the ids are stored under P:req:enqueue:<rid> in this same
-- script; a repeat of the call answers from it and inserts nothing.
-- ARGV: P, now|'', rid|'', rid_ttl_ms, then per job the 12 fields of enqueue_check.
-- Returns the ids in input order (integers).
local now, now_s = clock(ARGV[2])
local rid, rid_ttl = ARGV[3], ARGV[4]
local seen = req_get('enqueue', rid)
if seen then return split_ids(seen) end
room()  -- at the memory limit, fail here before the first write (_lib.lua)
local bad = enqueue_check(5)
if bad then return bad end
local out, woken = enqueue_insert(5, now, now_s)
req_put('enqueue', rid, join_ids(out), rid_ttl)
wake(woken)
return out
