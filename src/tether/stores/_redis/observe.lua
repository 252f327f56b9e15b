-- observe: notice a server restart or the loss of this prefix's data, and count each
-- incident once however many processes notice it.
-- Why: Redis without persistence (or with RDB only) forgets everything on restart, including
-- the id counter, so ids are handed out again; the token keeps old claims fenced, but people
-- must learn that jobs were lost. Two signs, compared with what the calling process saw last:
--  * P:epoch, a random value created by migrate: gone or different = the data was lost (or
--    replaced) under us. The first process to see it gone writes a new epoch (and puts the
--    layout marker back), and counts the loss in P:incidents; the others only see a
--    different epoch and log it.
--  * the server's run_id (INFO server; fine in a script, it writes nothing replicated):
--    different = the server restarted, or we are talking to another server (a failover).
--    P:incidents.run_id remembers the last one seen, so the restart is counted once.
-- A process that saw nothing yet (known_epoch '') only learns the current values; with
-- create = '1' (migrate) it also creates what is missing.
-- ARGV: P, known_epoch|'', known_run_id|'', fresh_epoch, create ('1'|'0'), schema_version
-- Returns {epoch|'', run_id, lost (0|1), restarted (0|1), missing_jobs}: the last is how many
-- job hashes claims and reaps found gone so far (evicted or deleted), for watch.py to log.
local now, now_s = clock('')
-- pcall: a server that renamed or disabled INFO still gets the epoch check.
local info = redis.pcall('INFO', 'server')
local run_id = ''
if type(info) == 'string' then run_id = string.match(info, 'run_id:(%x+)') or '' end
local ek, ik = P .. ':epoch', P .. ':incidents'
local epoch = redis.call('GET', ek)
local known_epoch, known_run = ARGV[2], ARGV[3]
local lost = 0
if known_epoch ~= '' and epoch ~= known_epoch then
  lost = 1
  if not epoch then
    epoch = ARGV[4]
    redis.call('SET', ek, epoch)
    redis.call('SET', P .. ':schema_version', ARGV[6], 'NX')
    redis.call('HINCRBY', ik, 'data_loss', 1)
    redis.call('HSET', ik, 'last_data_loss_at', now_s)
  end
end
if not epoch and (ARGV[5] == '1' or redis.call('EXISTS', P .. ':schema_version') == 1) then
  if ARGV[5] == '1' then redis.call('SET', P .. ':schema_version', ARGV[6], 'NX') end
  epoch = ARGV[4]
  redis.call('SET', ek, epoch)
end
local restarted = 0
if known_run ~= '' and known_run ~= run_id then restarted = 1 end
if epoch then
  local last = redis.call('HGET', ik, 'run_id')
  if last ~= run_id then
    if last or restarted == 1 then
      redis.call('HINCRBY', ik, 'restarts_seen', 1)
      redis.call('HSET', ik, 'last_restart_at', now_s)
    end
    redis.call('HSET', ik, 'run_id', run_id)
  end
end
return {epoch or '', run_id, lost, restarted, redis.call('HGET', ik, 'missing_jobs') or '0'}
