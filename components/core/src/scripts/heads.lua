-- The truth's last messages written into their conversations' heads, before
-- a rebuild lists them: a head takes the truth's seq and preview unless it
-- already holds a newer message; at the same seq the truth's preview wins
-- (the app applies a recall to its own heads).
-- Reply: how many heads changed.
local _, A, conversations = declare {
  args = {'head_ttl'},
  each = {keys = CONVERSATION_KEYS, args = {'seq', 'score', 'category', 'preview'}},
}
local changed = 0
for _, c in ipairs(conversations) do
  local seq, head = tonumber(c.seq), get_head(c.head)
  if not head or seq > head.seq or (seq == head.seq and head.preview ~= c.preview) then
    set_head(c.head, seq, c.score, c.category, c.preview, A.head_ttl)
    prune_recalls(c.recalls, seq)
    changed = changed + 1
  end
end
return changed
