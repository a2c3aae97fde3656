-- The user has seen everything up to seq (see read_up_to). ARGV: tenant,
-- user, conversation, seq, max_conversations, require_loaded ('1' with a SQL
-- store).

local tenant, user, conv = ARGV[1], ARGV[2], ARGV[3]
local p = user_prefix(tenant, user)
local missed = miss(p, ARGV[6])
if missed then return missed end
local status, read, now = read_up_to(tenant, user, conv, tonumber(ARGV[4]), tonumber(ARGV[5]))
return badge_reply(p, {status, read, now.unread, now.mentions})
