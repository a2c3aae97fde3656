-- A message was recalled or deleted: for each member whose read cursor is
-- below seq it stops counting (and mentioning). A recall that comes before
-- its message's touch is kept and wins when the touch comes, and so does the
-- preview given with it (kept with the head). Where seq is the last message,
-- the preview (if given) replaces the recalled one, for every member (in the
-- head, and in a state an earlier layout wrote with its own preview). A
-- replay, or a message the member already read, changes nothing. Members the
-- SQL store must answer for are named in the reply, not written (see
-- touch.lua).
-- A large conversation logs the recall instead, for every member to catch
-- up with on use; of the members named, those that catch up on use are not
-- written (nor counted in the reply). On Redis Cluster the head is a part
-- of its own, and a members part without it takes a member's membership of
-- the conversation, once caught up with the logs given, as telling that it
-- is large.
-- Reply: {dropped (members whose unread dropped), the log's counter ('' if
-- the part holds no log), logged (1: the recall is new to the log), n, n
-- users}.
local K, A, members = declare {
  keys = CONVERSATION_KEYS,
  args = {'conversation', 'seq', 'preview', 'max_conversations', 'max_kept', 'idle_ttl', 'require_loaded', 'channel',
          'head_ttl', 'logs', 'conversations', 'clocks'},
  each = {keys = USER_KEYS, args = {'user'}},
}
local conv, seq, preview, max_kept = A.conversation, tonumber(A.seq), A.preview, tonumber(A.max_kept)
local wanted = take_logs(A, members)
if wanted then return wanted end

if preview ~= '' and K then recall_preview(K, seq, preview, A.head_ttl) end
local large = K and log_counter(K.group)
local logged = large and log_entry(conv, K.group, 'r', seq, large)
-- On Redis Cluster the caller publishes it, once the clock moved.
if logged and keeps_clocks() then publish_conversation(A.channel, conv, seq) end

local function recall_member(m)
  local st, where = find(m, conv)
  if st and has_flag(st, 'x') then return false end
  st = st or new_state()
  local before = where == 'conv' and counted(st) or NOTHING
  local changed = where == nil
  if mark_recalled(m, conv, st, seq) then changed = true end
  if preview ~= '' and st.legacy and st.last == seq and st.legacy ~= preview then
    st.legacy = preview
    changed = true
  end
  if not changed then return false end
  if where ~= 'conv' then
    keep(m, conv, st, max_kept)
    idle(m, A.idle_ttl)
    return false
  end
  local now = save(m, conv, before, st)
  if differs(before, now) then publish(A.channel, m.user, conv, now, m) end
  return now.unread < before.unread
end

-- Whether member `m` catches up with this conversation's log (then the
-- log's entry is theirs, and their state is not written).
local function member_of_log(m)
  return (large or not K) and redis.call('HEXISTS', m.groups, conv) == 1
end

local dropped, unanswered = 0, {}
for _, m in ipairs(members) do
  if unloaded(m, A.require_loaded) or (beyond_kept(m, A.require_loaded) and not find(m, conv)) then
    unanswered[#unanswered + 1] = m.user
  else
    -- Without the head, the log is seen only as given: the member catches
    -- up first, which drops a membership whose log went (the conversation
    -- deleted without naming them) before it counts as one.
    if not K then catch_up(m, A.max_conversations, max_kept) end
    if not member_of_log(m) then
      if K then catch_up(m, A.max_conversations, max_kept) end
      -- A log that dropped entries the member was owed: the truth answers.
      if unloaded(m, A.require_loaded) then
        unanswered[#unanswered + 1] = m.user
      elseif recall_member(m) then
        dropped = dropped + 1
      end
    end
  end
end
local counter = logged or large
local out = {dropped, counter and int(counter) or '', logged and 1 or 0, #unanswered}
for _, user in ipairs(unanswered) do out[#out + 1] = user end
return out
