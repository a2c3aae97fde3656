-- A message was stored. ARGV: tenant, conversation, seq, ts, category, preview,
-- max_conversations, sender ('' if none), mention_all ('1'/'0'), number of
-- mentioned users, the mentioned users, then the members (deduplicated,
-- sender included). One atomic step for every member.

local tenant, conv, category, preview = ARGV[1], ARGV[2], ARGV[5], ARGV[6]
local seq, ts, max_conversations = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[7])
local sender, mention_all = ARGV[8], ARGV[9] == '1'
local mentioned = {}
for i = 11, 10 + tonumber(ARGV[10]) do mentioned[ARGV[i]] = true end
local first_member = 11 + tonumber(ARGV[10])

-- Keeps the newest max_conversations across all categories; pinned ones stay.
local function trim(p)
  while redis.call('HLEN', p .. 'dir') > max_conversations do
    local oldest_score, oldest_conv, oldest_category
    local pinned = redis.call('HLEN', p .. 'pinned')
    for _, c in ipairs(redis.call('HKEYS', p .. 'badge')) do
      local rows = redis.call('ZRANGE', list_key(p, c), 0, pinned, 'WITHSCORES')
      for i = 1, #rows, 2 do
        if redis.call('HEXISTS', p .. 'pinned', rows[i]) == 0 then
          local s = tonumber(rows[i + 1])
          if not oldest_score or s < oldest_score or (s == oldest_score and rows[i] < oldest_conv) then
            oldest_score, oldest_conv, oldest_category = s, rows[i], c
          end
          break
        end
      end
    end
    if not oldest_conv then return end
    drop_conversation(p, oldest_category, oldest_conv)
  end
end

local function first_touch(member, read_floor, mentions_member)
  local p = user_prefix(tenant, member)
  local early = tonumber(redis.call('HGET', p .. 'early', conv) or '0')
  if early > 0 then redis.call('HDEL', p .. 'early', conv) end
  local st = new_state(seq, math.max(early, read_floor), preview)
  if mentions_member then st.mentions = {seq} end
  redis.call('HSET', p .. 'dir', conv, category)
  redis.call('ZADD', list_key(p, category), int(score(ts, seq)), conv)
  save(tenant, member, category, conv, NOTHING, st)
  trim(p)
end

-- Returns true when the member's state changed.
local function touch_member(member)
  local read_floor = 0
  if member == sender then read_floor = seq end
  local mentions_member = member ~= sender and (mention_all or mentioned[member] ~= nil)
  local p = user_prefix(tenant, member)
  if redis.call('HEXISTS', p .. 'gone', conv) == 1 then return false end
  local st = load_state(p, category, conv)
  if not st then
    first_touch(member, read_floor, mentions_member)
    return true
  end
  local before = counted(st)
  local changed = false
  if seq > st.last then
    redis.call('ZADD', list_key(p, category), int(score(ts, seq)), conv)
    st.last, st.preview, changed = seq, preview, true
  end
  if read_floor > st.read then st.read, changed = read_floor, true end
  -- Writing to a conversation reads it: the sender's mark-unread goes (as in SQL).
  if member == sender and has_flag(st, 'u') then
    set_flag(st, 'u', false)
    changed = true
  end
  -- An older message arriving late still brings its mention, if unread.
  if mentions_member and seq > st.read and not contains(st.mentions, seq) then
    st.mentions[#st.mentions + 1] = seq
    changed = true
  end
  if changed then save(tenant, member, category, conv, before, st) end
  return changed
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
