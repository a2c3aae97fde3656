-- Members left a conversation, or it was deleted: each member's state of it
-- goes and their badges drop in the same step; a tombstone makes late
-- touches of it (held back, replayed) change nothing until a join brings the
-- member back, and the newest kept conversation takes the free place in
-- the list. A user with no state at all gets nothing (no keys for an empty
-- operation); with a SQL store neither does one Redis has not loaded (the
-- truth answers for them).
-- Reply: how many members had it.
local _, A, members = declare {
  args = {'conversation', 'max_conversations', 'max_kept', 'idle_ttl', 'require_loaded', 'channel'},
  each = {keys = USER_KEYS, args = {'user'}},
}
local conv, max_conversations, max_kept = A.conversation, tonumber(A.max_conversations), tonumber(A.max_kept)
local removed = 0
for _, m in ipairs(members) do
  local st, where = find(m, conv)
  local known = redis.call('EXISTS', m.meta) == 1 and not unloaded(m, A.require_loaded)
  if (st and not has_flag(st, 'x')) or (not st and known) then
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
    if moved then publish(A.channel, m.user, conv, NOTHING, m) end
    idle(m, A.idle_ttl)
  end
end
return removed
