-- save_checkpoint / set_progress: the fence check and the write must be one atomic step, or
-- a reaper could take the job between them and the old holder would overwrite the next
-- attempt's state. Fenced by (id, attempt, owner, token, status running). A replay writes the
-- same value again: harmless.
-- ARGV: P, id, attempt, owner, token, field ('checkpoint' | 'progress'), value
-- Returns 1 when written, 0 when the lease is stale.
local id = ARGV[2]
room()  -- at the memory limit, fail here before the first write (_lib.lua)
if not fenced(id, ARGV[3], ARGV[4], ARGV[5]) then return 0 end
redis.call('HSET', jk(id), ARGV[6], ARGV[7])
return 1
