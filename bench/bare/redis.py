"""The bare Redis loop (redis-py, two small Lua scripts) over its own keys under the run's
prefix: ``P:bare:pending`` (zset id -> run_at), ``P:bare:running`` (zset id -> lease end),
``P:bare:job:ID`` (hash: payload, attempt, token, status), ``P:bare:seq`` (id counter)."""

from __future__ import annotations

import time
import uuid

import redis

from bench.bare import BareResult, Heartbeat, Held, timed
from bench.common import redis_url_prefix

# Claim: pop up to ARGV[1] due ids, mark each running with attempt + 1 and this claim's token,
# put it in the running zset at its lease end; returns id, attempt, payload triples.
CLAIM = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, ARGV[1])
local out = {}
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  local k = ARGV[5] .. id
  local attempt = redis.call('HINCRBY', k, 'attempt', 1)
  redis.call('HSET', k, 'status', 'running', 'token', ARGV[3])
  redis.call('ZADD', KEYS[2], ARGV[4], id)
  out[#out + 1] = id
  out[#out + 1] = attempt
  out[#out + 1] = redis.call('HGET', k, 'payload')
end
return out
"""

# Finish: for each (id, attempt) of the batch, fenced by attempt + token: mark done, leave the
# running zset; returns how many were finished.
FINISH = """
local n = 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local k = ARGV[1] .. id
  local f = redis.call('HMGET', k, 'attempt', 'token', 'status')
  if f[1] == ARGV[i + 1] and f[2] == KEYS[2] and f[3] == 'running' then
    redis.call('HSET', k, 'status', 'done', 'token', '')
    redis.call('ZREM', KEYS[1], id)
    n = n + 1
  end
end
return n
"""

# Heartbeat: push the lease end of every held id whose token still matches.
RENEW = """
for i = 2, #ARGV, 2 do
  if redis.call('HGET', ARGV[1] .. ARGV[i], 'token') == ARGV[i + 1] then
    redis.call('ZADD', KEYS[1], 'XX', KEYS[2], ARGV[i])
  end
end
return 1
"""


def drain(url: str, n: int, batch: int, heartbeat_every: float) -> BareResult:
    base, prefix = redis_url_prefix(url)
    p = f"{prefix}:bare:"
    client = redis.Redis.from_url(base)
    beat_client = redis.Redis.from_url(base)
    pending, running, job = p + "pending", p + "running", p + "job:"
    try:
        now = time.time()
        pipe = client.pipeline(transaction=False)
        for i in range(1, n + 1):
            pipe.hset(f"{job}{i}", mapping={"payload": "[[], {}]", "attempt": 0,
                                            "status": "pending"})
            pipe.zadd(pending, {str(i): now})
            if i % 5000 == 0:
                pipe.execute()
        pipe.execute()
        claim, finish = client.register_script(CLAIM), client.register_script(FINISH)
        renew = beat_client.register_script(RENEW)
        held = Held()

        def beat(items: dict[int, object]) -> None:
            args: list[str | int | float] = [job]
            for i, t in items.items():
                args += [i, str(t)]
            renew(keys=[running, str(time.time() + 30.0)], args=args)

        def loop() -> int:
            done = 0
            while True:
                token = uuid.uuid4().hex
                now = time.time()
                flat = claim(keys=[pending, running], args=[batch, now, token, now + 30.0, job])
                if not flat:
                    return done
                ids = [int(x) for x in flat[0::3]]
                held.add(ids, token)
                for payload in flat[2::3]:  # the no-op "handlers"
                    _ = payload
                args: list[str | int | float] = [job]
                for i, a in zip(ids, flat[1::3], strict=True):
                    args += [i, a]
                done += int(finish(keys=[running, token], args=args))
                held.drop(ids)

        hb = Heartbeat(held, beat, heartbeat_every)
        hb.start()
        try:
            result = timed(loop, n)
        finally:
            hb.stop()
    finally:
        keys = [pending, running, p + "seq"]
        for start in range(1, n + 1, 5000):
            keys += [f"{job}{i}" for i in range(start, min(n, start + 4999) + 1)]
            client.unlink(*keys)
            keys = []
        client.close()
        beat_client.close()
    return result
