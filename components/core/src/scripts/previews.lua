-- The previews of listed rows, from their conversations' heads: a row's
-- preview is that of its last message, from the head or, if a message came
-- since the row was read, from the head's earlier messages; otherwise ''
-- (the member was not told of the conversation's newer messages, and no
-- preview of theirs is kept for them). A head read here lives on: its time
-- to live is renewed once half of it has passed (a read, mostly, not a
-- write).
-- Reply: one text per row, in order.
local _, A, rows = declare {args = {'head_ttl'}, each = {keys = {'head', 'earlier'}, args = {'last'}}}
local ttl = tonumber(A.head_ttl)
local out = {}
for i, r in ipairs(rows) do
  local head = get_head(r.head)
  out[i] = held_preview(r, head, tonumber(r.last)) or ''
  if head and redis.call('TTL', r.head) < ttl / 2 then redis.call('EXPIRE', r.head, ttl) end
end
return out
