-- Members joined a conversation after message seq (or came back to it):
-- each read cursor moves up to seq (never back), so what came before never
-- counts; a member who had left or whose conversation was deleted starts
-- again from seq. The member's own mark-unread stays. Members the SQL store
-- must answer for are named in the reply (see touch.lua).
-- Reply: {changed (members whose state changed), n, n users}.
local _, A, members = declare {
  args = {'conversation', 'seq', 'max_kept', 'require_loaded', 'channel'},
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
    return true
  end
  local before = where == 'conv' and counted(st) or NOTHING
  st.read = seq
  if where ~= 'conv' then
    keep(m, conv, st, max_kept)
    return true
  end
  local now = save(m, conv, before, st)
  if differs(before, now) then publish(A.channel, m.user, conv, now, m) end
  return true
end

local changed, unanswered = 0, {}
for _, m in ipairs(members) do
  if unloaded(m, A.require_loaded) or (beyond_kept(m, A.require_loaded) and not find(m, conv)) then
    unanswered[#unanswered + 1] = m.user
  elseif join_member(m) then
    changed = changed + 1
  end
end
local out = {changed, #unanswered}
for _, user in ipairs(unanswered) do out[#out + 1] = user end
return out
