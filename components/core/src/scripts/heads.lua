-- The truth's last messages written into their conversations' heads, before
-- a rebuild lists them: a head takes the truth's seq and preview unless it
-- already holds a newer message; at the same seq the truth's preview wins
-- (the app applies a recall to its own heads). A conversation the truth has
-- large (`large` 1) gets its log if Redis lost it, and a newer message in
-- its head moves the log's counter, for its members to catch up with.
-- Reply: how many heads changed.
local _, A, conversations = declare {
  args = {'head_ttl'},
  each = {keys = CONVERSATION_KEYS, args = {'seq', 'score', 'category', 'preview', 'large'}},
}
local changed = 0
for _, c in ipairs(conversations) do
  local seq, head = tonumber(c.seq), get_head(c.head)
  if c.large == '1' then make_large(c.group) end
  if not head or seq > head.seq or (seq == head.seq and head.preview ~= c.preview) then
    set_head(c.head, seq, c.score, c.category, c.preview, A.head_ttl)
    prune_recalls(c.recalls, seq)
    if c.large == '1' and (not head or seq > head.seq) then log_message(c.group) end
    changed = changed + 1
  end
end
return changed
