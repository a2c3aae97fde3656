-- Members joined a conversation after message seq (or came back to it):
-- each read cursor moves up to seq (never back), so what came before never
-- counts; a member who had left or whose conversation was deleted starts
-- again from seq. The member's own mark-unread stays. A member who had no
-- message of it yet gets it listed at once with the head's last message, as
-- a touch of it would have listed it. (With a SQL store the members are
-- rebuilt from the truth instead.)
-- On Redis Cluster the members of other slots than the head's come without
-- it: they take the head's text, and whether the conversation is large
-- (`large`, 1 or 0), read first, as arguments.
-- A member of a large conversation catches up on use from then on, from
-- the start of its log (what is at or below the cursor counts for nothing).
-- Who joins one that is not large yet is recorded for the message that
-- makes it large (record_joiners), here unless the head's read recorded
-- every member already (`recorded`, on Redis Cluster: joining.lua).
-- Reply: how many members' state changed.
local K, A, members = declare {
  keys = {'head', 'group', 'joined'},
  args = {'conversation', 'seq', 'max_conversations', 'max_kept', 'idle_ttl', 'channel', 'head', 'large', 'recorded',
          'logs', 'conversations', 'clocks'},
  each = {keys = USER_KEYS, args = {'user'}},
}
local conv, seq, max_kept = A.conversation, tonumber(A.seq), tonumber(A.max_kept)
local wanted = take_logs(A, members)
if wanted then return wanted end
local head, large
if K then
  head, large = get_head(K.head), log_counter(K.group) ~= nil
else
  head, large = decode_head(A.head), A.large == '1'
end

-- Lists a conversation the member has no message of, at the head's last
-- message (nothing to list if it has none yet).
local function list_at_head(m, st)
  if not head or head.score == '' then return false end
  st.last, st.category = head.seq, head.category
  enlist(m, conv, st, head.score)
  local now = save(m, conv, NOTHING, st)
  local trimmed = trim(m, tonumber(A.max_conversations), max_kept)
  if differs(NOTHING, now) or trimmed then publish(A.channel, m.user, conv, now, m) end
  return true
end

local function join_member(m)
  local st, where = find(m, conv)
  if st and has_flag(st, 'x') then
    drop_marks(m, conv)
    st, where = nil, nil
  end
  if st and seq <= st.read then
    return where == 'kept' and st.last == 0 and list_at_head(m, st)
  end
  if not st then
    st = new_state()
    st.read = seq
    if list_at_head(m, st) then return true end
    keep(m, conv, st, max_kept)
    idle(m, A.idle_ttl)
    return true
  end
  local before = where == 'conv' and counted(st) or NOTHING
  st.read = seq
  if where == 'kept' and st.last == 0 and list_at_head(m, st) then return true end
  if where ~= 'conv' then
    keep(m, conv, st, max_kept)
    idle(m, A.idle_ttl)
    return true
  end
  local now = save(m, conv, before, st)
  if differs(before, now) then publish(A.channel, m.user, conv, now, m) end
  return true
end

if K and not large and A.recorded ~= '1' then
  local users = {}
  for i, m in ipairs(members) do users[i] = m.user end
  record_joiners(K, users)
end
local changed = 0
for _, m in ipairs(members) do
  catch_up(m, A.max_conversations, max_kept)
  if join_member(m) then changed = changed + 1 end
  if large then join_large(m, conv, 0) end
end
return changed
