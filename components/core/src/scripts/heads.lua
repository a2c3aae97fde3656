-- The truth's last messages written into their conversations' heads, before
-- a rebuild lists them: a head takes the truth's seq and preview unless it
-- already holds a newer message; at the same seq the truth's preview wins
-- (the app applies a recall to its own heads).
-- Reply: how many heads changed.
local _, A, heads = declare {args = {'head_ttl'}, each = {keys = {'head'}, args = {'seq', 'preview'}}}
local changed = 0
for _, h in ipairs(heads) do
  local seq, got = tonumber(h.seq), redis.call('HMGET', h.head, 's', 'p')
  local last = tonumber(got[1] or '0')
  if seq > last or (seq == last and got[2] ~= h.preview) then
    set_head(h.head, seq, h.preview, A.head_ttl)
    changed = changed + 1
  end
end
return changed
