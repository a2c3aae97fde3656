-- Users who joined a conversation lately, before the message that made it
-- large, which did not name them (record_joiners): each who has not left
-- it and is no member of its log yet becomes one from the log's start, and
-- catches up on use as every member does. One with no state of it yet (on
-- Redis Cluster its join's part may come after this) gets it from the head
-- at that catch-up, and its join then moves the cursor.
-- Reply: how many became members.
local _, A, users = declare {args = {'conversation'}, each = {keys = USER_KEYS, args = {'user'}}}
local conv, adopted = A.conversation, 0
for _, u in ipairs(users) do
  local st = find(u, conv)
  if not (st and has_flag(st, 'x')) and not redis.call('HGET', u.groups, conv) then
    join_large(u, conv, 0)
    adopted = adopted + 1
  end
end
return adopted
