-- Cache-only, Redis holds the only copy of every read cursor: a Redis that
-- lost its data (restarted without persistence, flushed) must be told from a
-- new one. Redis keeps a record of the data set unread writes to; each
-- instance remembers the record it saw. A record that is gone or another
-- than the one remembered means the data set was lost: the record says so
-- from then on, to every instance, until an operator clears it (HDEL
-- un:v2:dataset lost; the record itself stays, or the next check sees a loss).
-- Times are Redis's own (ms): a record begun at another time is another.
local K, A = declare {keys = {'dataset'}, args = {'remembered'}}
local time = redis.call('TIME')
local now = string.format('%d', tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000))
local id = redis.call('HGET', K.dataset, 'id')
if not id then
  id = time[1] .. '.' .. time[2]
  redis.call('HSET', K.dataset, 'id', id, 'created', now)
end
if A.remembered ~= '' and A.remembered ~= id and redis.call('HEXISTS', K.dataset, 'lost') == 0 then
  redis.call('HSET', K.dataset, 'lost', now)
end
return {id, redis.call('HGET', K.dataset, 'lost') or ''}
