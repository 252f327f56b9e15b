-- ops_purge: delete up to `limit` jobs of one queue in the given states (never running), with
-- every index entry, the unique key of a live (pending or waiting) job and the workflow links
-- (unlink, _lib.lua), in one atomic step.
-- Workflows (invariant 6): a deleted job whose children wait, and that was not done, can never
-- be done: its waiting children are cancelled (dependency_failed, "job N was purged",
-- transitively) in this same script. Children always have higher ids than their parents (a
-- parent exists before its child is enqueued), so jobs are deleted newest first and waiting
-- ones before the others: a purge of a queue's waiting and pending jobs deletes a workflow
-- inside it whole instead of cancelling children it is about to delete anyway. A job whose
-- status changed under the purge (such a cancel) has left the index being read: it is
-- skipped, not deleted under the wrong indexes.
-- ARGV: P, queue, statuses (newline-separated), limit
-- Returns how many jobs were deleted.
local q, limit = ARGV[2], tonumber(ARGV[4])
local now, now_s = clock('')
local chosen = {}
for st in string.gmatch(ARGV[3], '[^\n]+') do
  if st == 'waiting' then table.insert(chosen, 1, st) else chosen[#chosen + 1] = st end
end
local deleted, woken = 0, {}
for _, st in ipairs(chosen) do
  if st ~= 'running' and deleted < limit then
    local ik = P .. ':idx:' .. q .. ':' .. st
    for _, id in ipairs(redis.call('ZREVRANGE', ik, 0, limit - deleted - 1)) do
      local v = redis.call('HMGET', jk(id), 'status', 'priority', 'unique_key', 'waiting_on',
        'children', 'waiters')
      if v[1] == st then
        if st == 'pending' then
          remove_pending(id, q, v[2])
          release_unique(id, v[3])
        elseif st == 'waiting' then
          release_unique(id, v[3])
        else
          redis.call('ZREM', P .. ':finished:' .. st, id)
        end
        redis.call('ZREM', ik, id)
        redis.call('DEL', jk(id))
        unlink(id, v[4], v[5])
        if v[6] then
          LINKED[#LINKED + 1] = {id, st == 'done' and 'done' or 'purged'}
          resolve_links(now, now_s, woken)
        end
        deleted = deleted + 1
      elseif not v[1] then
        redis.call('ZREM', ik, id)  -- a stray entry (hash gone): heal the index
      end
    end
  end
end
wake(woken)
announce()
return deleted
