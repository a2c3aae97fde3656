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
-- With a SQL store (`require_loaded`), a user Redis does not hold as
-- loaded, before or after the catch-up, is left alone: the truth already
-- has the cursors, and their next call rebuilds them from it.
local seen, held
for _, item in ipairs(items) do
  if pending and pending.user ~= item.user then flush() end
  if seen ~= item.user then
    seen = item.user
    held = caught_up(item, A)
  end
  local conv, seq = item.conversation, tonumber(item.seq)
  local st, where
  if held then st, where = find(item, conv) end
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
