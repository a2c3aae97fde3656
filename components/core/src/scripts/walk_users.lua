-- The next users of a tenant that have state, for a walk without a SQL
-- store: the names of their meta keys (the caller reads the users from
-- them). At most 20 SCAN steps a call. A user may come twice (SCAN's
-- guarantee); every walk step is idempotent.
-- Reply: the next SCAN cursor ('0' when the walk is complete), then key names.
local _, A = declare {args = {'pattern', 'cursor', 'wanted'}}
local cursor, wanted = A.cursor, tonumber(A.wanted)
local out = {cursor}
for _ = 1, 20 do
  local step = redis.call('SCAN', cursor, 'MATCH', A.pattern, 'COUNT', 1000)
  cursor = step[1]
  for _, key in ipairs(step[2]) do out[#out + 1] = key end
  if cursor == '0' or #out > wanted then break end
end
out[1] = cursor
return out
