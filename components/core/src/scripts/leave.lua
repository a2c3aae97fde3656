-- Members left a conversation, or it was deleted: each member's state of it
-- goes and their badges drop in the same step; a tombstone makes late
-- touches of it (held back, replayed) change nothing until a join brings the
-- member back, and the newest kept conversation takes the free place in
-- the list. A user with no state at all gets nothing (no keys for an empty
-- operation). With a SQL store, members Redis has not loaded (or whose
-- list only the truth can fill again) are named in the reply instead: the
-- caller rebuilds them from the truth (which no longer has them in the
-- conversation), so that their badge is pushed too.
-- Reply: {removed (members that had it), n, n users}.
local _, A, members = declare {
  args = {'conversation', 'max_conversations', 'max_kept', 'idle_ttl', 'require_loaded', 'channel', 'logs',
          'conversations', 'clocks'},
  each = {keys = USER_KEYS, args = {'user'}},
}
local wanted = take_logs(A, members)
if wanted then return wanted end
local conv, max_conversations, max_kept = A.conversation, tonumber(A.max_conversations), tonumber(A.max_kept)
local removed, unanswered = 0, {}
for _, m in ipairs(members) do
  -- The conversation left too catches up first: what it counts now is what
  -- leaving takes off the badge (and what the event tells).
  catch_up(m, max_conversations, max_kept)
  redis.call('HDEL', m.groups, conv)
  local st, where = find(m, conv)
  local known = redis.call('EXISTS', m.meta) == 1
  if unloaded(m, A.require_loaded) then
    unanswered[#unanswered + 1] = m.user
  elseif (st and not has_flag(st, 'x')) or (not st and known) then
    local moved = false
    if where == 'conv' then
      local _, was = unlist(m, conv)
      moved = differs(was, NOTHING)
    end
    if st then removed = removed + 1 end
    drop_marks(m, conv)
    local tombstone = new_state(st and st.category)
    set_flag(tombstone, 'x', true)
    keep(m, conv, tombstone, max_kept)
    if rebalance(m, max_conversations, max_kept) then moved = true end
    if unloaded(m, A.require_loaded) then
      -- The truth fills the list (rebalance): the caller rebuilds the member.
      unanswered[#unanswered + 1] = m.user
    elseif moved then
      publish(A.channel, m.user, conv, NOTHING, m)
    end
    idle(m, A.idle_ttl)
  end
end
local out = {removed, #unanswered}
for _, user in ipairs(unanswered) do out[#out + 1] = user end
return out
