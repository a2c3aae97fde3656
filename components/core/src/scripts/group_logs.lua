-- What members of large conversations catch up with, read for a call on
-- Redis Cluster (whose users' scripts cannot read other slots; see
-- take_logs): per conversation, its log's counter, its head's last message
-- and the log's entries after `after`, how far the call's users caught up.
-- Reply: one text per conversation, as encode_log writes it.
local _, _, logs = declare {each = {keys = {'head', 'group'}, args = {'conversation', 'after'}}}
local out = {}
for i, l in ipairs(logs) do out[i] = encode_log(l.conversation, read_log(l.head, l.group, tonumber(l.after))) end
return out
