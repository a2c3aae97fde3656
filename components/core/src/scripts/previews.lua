-- The previews of listed rows, from their conversations' heads: a row's
-- preview is its head's when the head's last message is the row's last;
-- otherwise '' (the member was not told of the conversation's newer
-- messages, and no preview of theirs is shown to them). A head read here
-- lives on: its time to live is renewed once half of it has passed (a read,
-- mostly, not a write).
-- Reply: one text per row, in order.
local _, A, rows = declare {args = {'head_ttl'}, each = {keys = {'head'}, args = {'last'}}}
local ttl = tonumber(A.head_ttl)
local out = {}
for i, r in ipairs(rows) do
  local head = get_head(r.head)
  out[i] = (head and head.seq == tonumber(r.last) and head.preview) or ''
  if head and redis.call('TTL', r.head) < ttl / 2 then redis.call('EXPIRE', r.head, ttl) end
end
return out
