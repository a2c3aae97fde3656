-- Clears one category: each listed conversation is read up to the given seq
-- (never further, so a message arriving meanwhile stays unread) and loses its
-- mark-unread flag; a conversation of another category is never changed.
-- One item per (user, conversation), a user's items together.
-- Reply: how many conversations changed.
local _, A, items = declare {
  args = {'category', 'max_conversations', 'max_kept', 'require_loaded', 'channel', 'logs', 'conversations', 'clocks'},
  each = {keys = USER_KEYS, args = {'user', 'conversation', 'seq'}},
}
local wanted = take_logs(A, items)
if wanted then return wanted end
local changed, pending = 0, nil
local function flush()
  if pending then publish(A.channel, pending.user, nil, nil, pending) end
  pending = nil
end
local caught_up
for _, item in ipairs(items) do
  if pending and pending.user ~= item.user then flush() end
  if caught_up ~= item.user then
    caught_up = item.user
    catch_up(item, A.max_conversations, A.max_kept)
  end
  local conv, seq = item.conversation, tonumber(item.seq)
  local st, where = find(item, conv)
  if st and st.category == A.category and not has_flag(st, 'x') and (seq > st.read or has_flag(st, 'u')) then
    local before = where == 'conv' and counted(st) or NOTHING
    st.read = math.max(st.read, seq)
    set_flag(st, 'u', false)
    if where == 'conv' then
      if differs(before, save(item, conv, before, st)) then pending = item end
    else
      keep(item, conv, st, tonumber(A.max_kept))
    end
    changed = changed + 1
  end
end
flush()
return changed
