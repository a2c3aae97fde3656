-- A message was stored. ARGV: tenant, conversation, seq, ts, category, preview,
-- max_conversations, sender ('' if none), then the members (deduplicated,
-- sender included). One atomic step for every member.

local tenant, conv, category, preview = ARGV[1], ARGV[2], ARGV[5], ARGV[6]
local seq, ts, max_conversations = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[7])
local sender = ARGV[8]
local first_member = 9

-- Keeps the newest max_conversations across all categories.
local function trim(p)
  while redis.call('HLEN', p .. 'dir') > max_conversations do
    local oldest_score, oldest_conv, oldest_category
    local categories = redis.call('HKEYS', p .. 'badge')
    for _, c in ipairs(categories) do
      local row = redis.call('ZRANGE', list_key(p, c), 0, 0, 'WITHSCORES')
      if row[1] then
        local s = tonumber(row[2])
        if not oldest_score or s < oldest_score or (s == oldest_score and row[1] < oldest_conv) then
          oldest_score, oldest_conv, oldest_category = s, row[1], c
        end
      end
    end
    drop_conversation(p, oldest_category, oldest_conv)
  end
end

local function add_conversation(p, read_floor)
  local early = tonumber(redis.call('HGET', p .. 'early', conv) or '0')
  if early > 0 then redis.call('HDEL', p .. 'early', conv) end
  local read = math.max(early, read_floor)
  redis.call('HSET', p .. 'dir', conv, category)
  redis.call('ZADD', list_key(p, category), int(score(ts, seq)), conv)
  redis.call('HSET', conv_key(p, category), conv, encode_state(seq, read, preview))
  redis.call('HINCRBY', p .. 'badge', category, int(unread(seq, read)))
  trim(p)
end

-- Returns true when the member's state changed.
local function touch_member(member)
  local p = user_prefix(tenant, member)
  local read_floor = 0
  if member == sender then read_floor = seq end
  local value = redis.call('HGET', conv_key(p, category), conv)
  if not value then
    add_conversation(p, read_floor)
    bump(p)
    return true
  end
  local last, read, shown = decode_state(value)
  local new_last, new_read = math.max(last, seq), math.max(read, read_floor)
  if new_last == last and new_read == read then return false end
  if seq > last then
    redis.call('ZADD', list_key(p, category), int(score(ts, seq)), conv)
    shown = preview
  end
  redis.call('HSET', conv_key(p, category), conv, encode_state(new_last, new_read, shown))
  local delta = unread(new_last, new_read) - unread(last, read)
  if delta ~= 0 then redis.call('HINCRBY', p .. 'badge', category, int(delta)) end
  bump(p)
  return true
end

-- A conversation lives in one category per user: refuse a change before writing.
for i = first_member, #ARGV do
  local current = redis.call('HGET', user_prefix(tenant, ARGV[i]) .. 'dir', conv)
  if current and current ~= category then
    return {'conflict', ARGV[i], current}
  end
end

local applied = 0
for i = first_member, #ARGV do
  if touch_member(ARGV[i]) then applied = 1 end
end
return {'ok', applied}
