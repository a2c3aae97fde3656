-- The next users of a tenant that have state, for a walk without a SQL
-- store. ARGV: tenant, SCAN cursor ('0' to start), wanted. Reply: next
-- cursor ('0' when the walk is complete), then users. A user may come twice
-- (SCAN's guarantee); every walk step is idempotent.

local tenant, cursor, wanted = ARGV[1], ARGV[2], tonumber(ARGV[3])
local prefix = user_prefix(tenant, '')
local pattern = 'un:v1:{' .. tenant .. ':*}:meta'
local out = {cursor}
-- Bounded work per call: at most 20 SCAN steps.
for _ = 1, 20 do
  local step = redis.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)
  cursor = step[1]
  for _, key in ipairs(step[2]) do
    out[#out + 1] = string.sub(key, #prefix - 1, #key - #'}:meta')
  end
  if cursor == '0' or #out > wanted then break end
end
out[1] = cursor
return out
