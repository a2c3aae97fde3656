-- A message was stored: the conversation's head takes its preview (once,
-- for every member) and every member's state moves, in one atomic step. Role:
-- 's' the sender (the message reads the conversation for them), 'm'
-- mentioned, '' neither. Idempotent and order-free: an older message that
-- arrives late never moves the conversation nor its preview, but still
-- brings its mention if it is unread; a left or deleted conversation stays
-- gone. With a SQL store, members Redis cannot answer for (unloaded, or a
-- conversation beyond what was kept) are not written but named in the
-- reply: the caller rebuilds them from the truth, which holds this message.
-- On Redis Cluster the head and each slot's members are separate parts
-- (the head's part has no members, or those of its slot), which cannot
-- refuse together, so a touch goes in rounds (`mode`): 'head' first, the
-- head alone: it refuses a message of another category than the head's and
-- otherwise takes it, or, with no category to vouch for, writes nothing and
-- answers 'unvouched'; then 'members', every member part without the head
-- (a conversation lives in its head's category). Unvouched, a round of
-- 'check' looks for a conflict in every part before a round of 'all'
-- writes. Standalone Redis runs the whole touch in one step ('all').
-- Reply: {'ok', applied (0/1), n, n unanswerable users}, {'unvouched'} or
-- {'conflict', user ('' for the head), category}.
local K, A, members = declare {
  keys = CONVERSATION_KEYS,
  args = {'conversation', 'seq', 'score', 'category', 'preview', 'mention_all', 'max_conversations', 'max_kept',
          'require_loaded', 'channel', 'head_ttl', 'mode'},
  each = {keys = USER_KEYS, args = {'user', 'role'}},
}
local conv, category, mode = A.conversation, A.category, A.mode
local seq, score = tonumber(A.seq), A.score
local max_conversations, max_kept = tonumber(A.max_conversations), tonumber(A.max_kept)

if mode == 'head' then
  local head = get_head(K.head)
  if not head or head.category == '' then return {'unvouched'} end
  if head.category ~= category then return {'conflict', '', head.category} end
end

-- A conversation lives in one category: refuse a change before writing.
-- What each member has of it is read once, here.
local found = {}
for i, m in ipairs(members) do
  local st, where = find(m, conv)
  if mode ~= 'members' and st and st.category ~= '' and st.category ~= category and not has_flag(st, 'x') then
    return {'conflict', m.user, st.category}
  end
  found[i] = {st = st, where = where}
end
if mode == 'check' then return {'ok', 0, 0} end

if K and mode ~= 'members' then advance_head(K, seq, A.score, category, A.preview, A.head_ttl) end

-- Returns whether the member's state changed, and whether its numbers moved.
local function touch_member(m, st, where)
  if st and has_flag(st, 'x') then return false, false end
  local before = where == 'conv' and counted(st) or NOTHING
  st = st or new_state(category)
  local changed, newer = where == nil, seq > st.last
  if st.category ~= category then
    -- Another category only after the head vouched for this one (a state
    -- from before the head, on a cluster): the old category gives up what
    -- the state counted there.
    move_badge(m, st.category, before, NOTHING)
    before, st.category, changed = NOTHING, category, true
  end
  if newer then
    st.last = seq
    st.legacy = nil
    changed = true
  end
  if m.role == 's' and (seq > st.read or has_flag(st, 'u')) then
    -- Writing to a conversation reads it: the sender's mark-unread goes too.
    st.read = math.max(st.read, seq)
    set_flag(st, 'u', false)
    changed = true
  end
  local mentioned = m.role == 'm' or (A.mention_all == '1' and m.role ~= 's')
  if mentioned and seq > st.read and not has_mark(m, conv, 'm', seq) and not has_mark(m, conv, 'r', seq) then
    add_mark(m, conv, st, 'm', seq)
    changed = true
  end
  if not changed then return false, false end
  if where == 'kept' and not newer then
    -- A late message of a conversation that is not listed leaves it there.
    keep(m, conv, st, max_kept)
    return true, false
  end
  if where ~= 'conv' then
    enlist(m, conv, st, score)
  elseif newer then
    redis.call('ZADD', m.list, score, conv)
  end
  local now = save(m, conv, before, st)
  -- Only a conversation newly listed can push another one out.
  local trimmed = where ~= 'conv' and trim(m, max_conversations, max_kept)
  return true, differs(before, now) or trimmed, now
end

local applied, unanswered = 0, {}
for i, m in ipairs(members) do
  local st, where = found[i].st, found[i].where
  if unloaded(m, A.require_loaded) or (beyond_kept(m, A.require_loaded) and not st) then
    unanswered[#unanswered + 1] = m.user
  else
    local changed, moved, now = touch_member(m, st, where)
    if changed then applied = 1 end
    if moved then publish(A.channel, m.user, conv, now or NOTHING, m) end
  end
end
local out = {'ok', applied, #unanswered}
for _, user in ipairs(unanswered) do out[#out + 1] = user end
return out
