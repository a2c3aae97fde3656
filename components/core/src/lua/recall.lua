-- A message was recalled or deleted. ARGV: tenant, conversation, seq,
-- preview ('' for none), members... For each member whose read cursor is
-- below seq it stops counting (and stops mentioning); a replay or a read
-- message changes nothing. Where seq is the last message, the preview (if
-- given) replaces the recalled one, read or not. Returns how many members'
-- unread dropped.

local tenant, conv, seq, preview = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local dropped = 0
for i = 5, #ARGV do
  local user = ARGV[i]
  local p = user_prefix(tenant, user)
  local category = redis.call('HGET', p .. 'dir', conv)
  local st = category and load_state(p, category, conv)
  if st then
    local before = counted(st)
    local changed = false
    if seq > st.read and not contains(st.recalled, seq) then
      st.recalled[#st.recalled + 1] = seq
      changed = true
    end
    if preview ~= '' and st.last == seq and st.preview ~= preview then
      st.preview = preview
      changed = true
    end
    if changed and save(tenant, user, category, conv, before, st).unread < before.unread then
      dropped = dropped + 1
    end
  end
end
return dropped
