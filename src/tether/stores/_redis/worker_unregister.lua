-- unregister_worker: drop the row and its last_seen entry together.
-- ARGV: P, worker_id
redis.call('HDEL', P .. ':workers', ARGV[2])
redis.call('ZREM', P .. ':workers:seen', ARGV[2])
return 1
