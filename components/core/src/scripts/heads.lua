-- The truth's last messages written into their conversations' heads, before
-- a rebuild lists them: a head takes the truth's seq and preview unless it
-- already holds a newer message; at the same seq the truth's preview wins
-- (the app applies a recall to its own heads), but a recall unread was told
-- of wins over both (the truth may have been read before the app's store
-- took it). A conversation the truth has large (`large` 1) gets its log
-- if Redis lost it, and a newer message in its head moves the log's
-- counter, for its members to catch up with. It is not announced here (the
-- message's touch may have come before Redis lost the conversation): its
-- touch, coming after, finds the head moved and announces it by the note
-- this leaves (note_unannounced).
-- Reply: how many heads changed, then n, and, on Redis Cluster (where this
-- script cannot reach the clocks), n times a large conversation, its log's
-- counter and whether its log is new.
local _, A, conversations = declare {
  args = {'head_ttl', 'clocks'},
  each = {keys = CONVERSATION_KEYS, args = {'conversation', 'seq', 'score', 'category', 'preview', 'large'}},
}
use_clocks(A.clocks)
local changed, logs = 0, {}
for _, c in ipairs(conversations) do
  local seq, head = tonumber(c.seq), get_head(c.head)
  local preview = redis.call('HGET', c.recalls, int(seq)) or c.preview
  local fresh = c.large == '1' and make_large(c.conversation, c.group)
  local counter -- the log's, once a message here moved it
  if not head or seq > head.seq or (seq == head.seq and head.preview ~= preview) then
    set_head(c.head, seq, c.score, c.category, preview, A.head_ttl)
    prune_recalls(c.recalls, seq)
    if c.large == '1' and (not head or seq > head.seq) then
      counter = log_message(c.conversation, c.group)
      note_unannounced(c, seq)
    end
    changed = changed + 1
  end
  if c.large == '1' and not keeps_clocks() then
    counter = counter or log_counter(c.group)
    for _, v in ipairs({c.conversation, int(counter), fresh and 1 or 0}) do logs[#logs + 1] = v end
  end
end
local out = {changed, #logs / 3}
for _, v in ipairs(logs) do out[#out + 1] = v end
return out
