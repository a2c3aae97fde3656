-- The previews of listed rows, from their conversations' heads, on Redis
-- Cluster (on one Redis the list reads them with its rows): a row's preview
-- is that of its last message, from the head or, if a message came since
-- the row was read, from the head's earlier messages (shown_preview).
-- Reply: one text per row, in order.
local _, A, rows = declare {args = {'head_ttl'}, each = {keys = {'head', 'earlier'}, args = {'last'}}}
local ttl = tonumber(A.head_ttl)
local out = {}
for i, r in ipairs(rows) do out[i] = shown_preview(r, tonumber(r.last), ttl) end
return out
