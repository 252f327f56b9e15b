-- save_checkpoint / set_progress: the fence check and the write must be one atomic step, or
-- a reaper could take the job between them and the old holder would overwrite the next
-- attempt's state. Fenced by (id, attempt, owner, status running).
-- ARGV: P, id, attempt, owner, field ('checkpoint' | 'progress'), value
-- Returns 1 when written, 0 when the lease is stale.
local id = ARGV[2]
if not fenced(id, ARGV[3], ARGV[4]) then return 0 end
redis.call('HSET', jk(id), ARGV[5], ARGV[6])
return 1
