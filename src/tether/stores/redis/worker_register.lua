-- register_worker: the worker's static row (JSON in the workers hash) and its last_seen
-- (workers:seen zset, which heartbeat refreshes with ZADD XX) change together.
-- ARGV: P, now|'', worker_id, info_json (host, pid, queues, concurrency)
-- Returns now as text (started_at = last_seen = now).
local now, now_s = clock(ARGV[2])
-- started_at is spliced into the caller's JSON object text (never decoded: cjson would turn an
-- empty queue list into {} and round the float).
local info = string.sub(ARGV[4], 1, -2) .. ',"started_at":' .. now_s .. '}'
redis.call('HSET', P .. ':workers', ARGV[3], info)
redis.call('ZADD', P .. ':workers:seen', now, ARGV[3])
return now_s
