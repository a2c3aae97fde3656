-- The user has seen everything up to seq. ARGV: tenant, user, conversation,
-- seq, max_conversations, require_loaded ('1' with a SQL store). The cursor
-- never moves back; what arrived after seq stays unread (seed 000's clear
-- rule); a mark-unread flag goes. A cursor ahead of the conversation's first
-- touch is kept in `early` so that the late touch does not count.

local tenant, user, conv = ARGV[1], ARGV[2], ARGV[3]
local seq, max_conversations = tonumber(ARGV[4]), tonumber(ARGV[5])
local p = user_prefix(tenant, user)
local missed = miss(p, ARGV[6])
if missed then return missed end

local function remember_early()
  local early = tonumber(redis.call('HGET', p .. 'early', conv) or '0')
  if seq <= early then return early end
  bounded_set(p .. 'early', conv, int(seq), max_conversations)
  bump(p)
  return seq
end

local category = redis.call('HGET', p .. 'dir', conv)
if not category then
  return badge_reply(p, {'early', remember_early(), 0, 0})
end

local st = load_state(p, category, conv)
local before = counted(st)
local now = before
if seq > st.read or has_flag(st, 'u') then
  st.read = math.max(st.read, seq)
  set_flag(st, 'u', false)
  now = save(tenant, user, category, conv, before, st)
end
return badge_reply(p, {'ok', st.read, now.unread, now.mentions})
