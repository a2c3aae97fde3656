-- Users whose writes reached only the SQL store (Redis was unreachable):
-- their Redis state is no longer the truth, so the next read rebuilds it.
local _, _, users = declare {each = {keys = {'meta'}}}
for _, u in ipairs(users) do redis.call('HDEL', u.meta, 'loaded') end
return #users
