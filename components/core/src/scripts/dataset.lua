-- Cache-only, Redis holds the only copy of every read cursor: a Redis that
-- lost its data (restarted without persistence, flushed) must be told from a
-- new one. Redis keeps a record of the data set unread writes to; each
-- instance remembers the record it saw. A record that is gone or another
-- than the one remembered means the data set was lost: the record says so
-- from then on, to every instance, until an operator clears it (HDEL
-- un:v2:dataset lost; the record itself stays, or the next check sees a loss).
local K, A = declare {keys = {'dataset'}, args = {'remembered', 'candidate', 'now'}}
local id = redis.call('HGET', K.dataset, 'id')
if not id then
  id = A.candidate
  redis.call('HSET', K.dataset, 'id', id, 'created', A.now)
end
if A.remembered ~= '' and A.remembered ~= id and redis.call('HEXISTS', K.dataset, 'lost') == 0 then
  redis.call('HSET', K.dataset, 'lost', A.now)
end
return {id, redis.call('HGET', K.dataset, 'lost') or ''}
