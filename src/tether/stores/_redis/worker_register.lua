-- register_worker: the worker's static row (JSON in the workers hash) and its last_seen
-- (workers:seen zset, which heartbeat refreshes with ZADD XX) change together. Registering an
-- id again (a replay, or a refresh) keeps its first started_at and updates the rest.
-- ARGV: P, now|'', worker_id, info_json (host, pid, queues, concurrency)
-- Returns started_at as text.
local now, now_s = clock(ARGV[2])
room()  -- at the memory limit, fail here before the first write (_lib.lua)
local started = now_s
local old = redis.call('HGET', P .. ':workers', ARGV[3])
if old then
  local kept = string.match(old, '"started_at":([%d%.eE+-]+)')
  if kept then started = kept end
end
-- started_at is spliced into the caller's JSON object text (never decoded: cjson would turn an
-- empty queue list into {} and round the float).
local info = string.sub(ARGV[4], 1, -2) .. ',"started_at":' .. started .. '}'
redis.call('HSET', P .. ':workers', ARGV[3], info)
redis.call('ZADD', P .. ':workers:seen', now, ARGV[3])
return started
