-- A conversation was deleted: every listed member's state for it goes and
-- their badges drop, in one step. ARGV: tenant, conversation, members...
-- Returns how many members had it.
local tenant, conv = ARGV[1], ARGV[2]
local removed = 0
for i = 3, #ARGV do
  local user = ARGV[i]
  local p = user_prefix(tenant, user)
  local category = redis.call('HGET', p .. 'dir', conv)
  local early = redis.call('HDEL', p .. 'early', conv)
  if category then
    local st = load_state(p, category, conv)
    drop_conversation(p, category, conv)
    removed = removed + 1
    local was = counted(st)
    if was.unread > 0 or was.badge > 0 or was.mentions > 0 then publish(tenant, user, conv, NOTHING) end
  end
  if category or early == 1 then bump(p) end
end
return removed
