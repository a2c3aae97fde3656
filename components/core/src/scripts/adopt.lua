-- Users who joined a conversation lately, before the message that made it
-- large, which did not name them (record_joiners): each who still has the
-- conversation (not left) and is no member of its log yet becomes one from
-- the log's start, and catches up on use as every member does.
-- Reply: how many became members.
local _, A, users = declare {args = {'conversation'}, each = {keys = USER_KEYS, args = {'user'}}}
local conv, adopted = A.conversation, 0
for _, u in ipairs(users) do
  local st = find(u, conv)
  if st and not has_flag(st, 'x') and not redis.call('HGET', u.groups, conv) then
    join_large(u, conv, 0)
    adopted = adopted + 1
  end
end
return adopted
