-- A message was recalled or deleted. ARGV: tenant, conversation, seq,
-- members... For each member whose read cursor is below seq it stops
-- counting (and stops mentioning); a replay or a read message changes
-- nothing. Returns how many members' unread dropped.

local tenant, conv, seq = ARGV[1], ARGV[2], tonumber(ARGV[3])
local dropped = 0
for i = 4, #ARGV do
  local user = ARGV[i]
  local p = user_prefix(tenant, user)
  local category = redis.call('HGET', p .. 'dir', conv)
  local st = category and load_state(p, category, conv)
  if st and seq > st.read and not contains(st.recalled, seq) then
    local before = counted(st)
    st.recalled[#st.recalled + 1] = seq
    local now = save(tenant, user, category, conv, before, st)
    if now.unread < before.unread then dropped = dropped + 1 end
  end
end
return dropped
