-- The next users of a tenant that have state, for a walk without a SQL
-- store: the names of their meta keys (the caller reads the users from
-- them). At most 20 SCAN steps a call. A user may come twice (SCAN's
-- guarantee); every walk step is idempotent.
-- A SCAN cursor means something only to the process that issued it: a
-- server restarted (with its data) or a replica promoted in its place
-- hashes keys with another seed, and an old cursor would pass over users.
-- So the cursor travels with the server's run id (`server`, '' when the
-- caller checks that itself), and a cursor of another server starts over.
-- Reply: the next SCAN cursor ('0' when the walk is complete), the run id
-- (its first 16 digits, '' if the server does not tell), then key names.
local _, A = declare {args = {'pattern', 'cursor', 'server', 'wanted'}}
-- A server that refuses INFO to scripts (a managed one, an ACL) walks
-- unchecked, as before.
local info = redis.pcall('INFO', 'server')
local server = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or ''
server = string.sub(server, 1, 16)
local cursor, wanted = A.cursor, tonumber(A.wanted)
if A.server ~= '' and A.server ~= server then cursor = '0' end
local out = {cursor, server}
for _ = 1, 20 do
  local step = redis.call('SCAN', cursor, 'MATCH', A.pattern, 'COUNT', 1000)
  cursor = step[1]
  for _, key in ipairs(step[2]) do out[#out + 1] = key end
  if cursor == '0' or #out > wanted + 1 then break end
end
out[1] = cursor
return out
