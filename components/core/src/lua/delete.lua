-- A conversation was deleted: every listed member's state for it goes and
-- their badges drop, in one step. ARGV: tenant, conversation, members...
-- Returns how many members had it.
local tenant, conv = ARGV[1], ARGV[2]
local removed = 0
for i = 3, #ARGV do
  local p = user_prefix(tenant, ARGV[i])
  local category = redis.call('HGET', p .. 'dir', conv)
  local early = redis.call('HDEL', p .. 'early', conv)
  if category then
    drop_conversation(p, category, conv)
    removed = removed + 1
  end
  if category or early == 1 then bump(p) end
end
return removed
