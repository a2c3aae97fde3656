-- The user has seen everything up to seq. ARGV: tenant, user, conversation,
-- seq, max_conversations, require_loaded ('1' with a SQL store). The cursor never moves back; what arrived after seq
-- stays unread (seed 000's clear rule). A cursor ahead of the conversation's
-- first touch is kept in `early` so that the late touch does not count.

local tenant, user, conv = ARGV[1], ARGV[2], ARGV[3]
local seq, max_conversations = tonumber(ARGV[4]), tonumber(ARGV[5])
local p = user_prefix(tenant, user)
local missed = miss(p, ARGV[6])
if missed then return missed end

local function remember_early()
  local early_key = p .. 'early'
  local early = tonumber(redis.call('HGET', early_key, conv) or '0')
  if seq <= early then return early end
  if early == 0 and redis.call('HLEN', early_key) >= max_conversations then
    -- Bounded: forget an arbitrary older early cursor.
    redis.call('HDEL', early_key, redis.call('HRANDFIELD', early_key))
  end
  redis.call('HSET', early_key, conv, int(seq))
  bump(p)
  return seq
end

local category = redis.call('HGET', p .. 'dir', conv)
if not category then
  return badge_reply(p, {'early', remember_early(), 0})
end

local key = conv_key(p, category)
local last, read, preview = decode_state(redis.call('HGET', key, conv))
if seq > read then
  redis.call('HSET', key, conv, encode_state(last, seq, preview))
  local delta = unread(last, seq) - unread(last, read)
  if delta ~= 0 then redis.call('HINCRBY', p .. 'badge', category, int(delta)) end
  bump(p)
  read = seq
end
return badge_reply(p, {'ok', read, unread(last, read)})
