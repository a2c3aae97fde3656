-- Members joined a conversation after message seq (or came back to it):
-- each read cursor moves up to seq (never back), so what came before never
-- counts; a member who had left or whose conversation was deleted starts
-- again from seq. The member's own mark-unread stays. (With a SQL store the
-- members are rebuilt from the truth instead.)
-- Reply: how many members' state changed.
local _, A, members = declare {
  args = {'conversation', 'seq', 'max_kept', 'idle_ttl', 'channel'},
  each = {keys = USER_KEYS, args = {'user'}},
}
local conv, seq, max_kept = A.conversation, tonumber(A.seq), tonumber(A.max_kept)

local function join_member(m)
  local st, where = find(m, conv)
  if st and has_flag(st, 'x') then
    drop_marks(m, conv)
    st, where = nil, nil
  end
  if st and seq <= st.read then return false end
  if not st then
    st = new_state()
    st.read = seq
    keep(m, conv, st, max_kept)
    idle(m, A.idle_ttl)
    return true
  end
  local before = where == 'conv' and counted(st) or NOTHING
  st.read = seq
  if where ~= 'conv' then
    keep(m, conv, st, max_kept)
    idle(m, A.idle_ttl)
    return true
  end
  local now = save(m, conv, before, st)
  if differs(before, now) then publish(A.channel, m.user, conv, now, m) end
  return true
end

local changed = 0
for _, m in ipairs(members) do
  if join_member(m) then changed = changed + 1 end
end
return changed
