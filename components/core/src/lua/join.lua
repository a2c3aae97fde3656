-- Members joined a conversation after message seq: for each, the read cursor
-- moves up to seq (see read_up_to), so what came before they joined never
-- counts. ARGV: tenant, conversation, seq, max_conversations, members...
-- Returns how many members' state changed.

local tenant, conv, seq, max_conversations = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local changed = 0
for i = 5, #ARGV do
  local _, _, _, moved = read_up_to(tenant, ARGV[i], conv, seq, max_conversations)
  if moved then changed = changed + 1 end
end
return changed
