-- A conversation was deleted: every listed member's state for it goes and
-- their badges drop, in one step; a tombstone makes late touches of it (held
-- back, replayed) change nothing. ARGV: tenant, conversation,
-- max_conversations, members... Returns how many members had it.
local tenant, conv, max_conversations = ARGV[1], ARGV[2], tonumber(ARGV[3])
local removed = 0
for i = 4, #ARGV do
  local user = ARGV[i]
  local p = user_prefix(tenant, user)
  local category = redis.call('HGET', p .. 'dir', conv)
  redis.call('HDEL', p .. 'early', conv)
  if category then
    local st = load_state(p, category, conv)
    drop_conversation(p, category, conv)
    removed = removed + 1
    local was = counted(st)
    if was.unread > 0 or was.badge > 0 or was.mentions > 0 then publish(tenant, user, conv, NOTHING) end
  end
  bounded_set(p .. 'gone', conv, '1', max_conversations)
  bump(p)
end
return removed
