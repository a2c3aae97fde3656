-- Rewrites users' state from the truth read from SQL, when it differs, and
-- reports the drift. A user whose
-- version moved since the truth was read is left alone ('moved'): the caller
-- reads the truth again.
-- ARGV: tenant, then per user: user, expected version, n, then n rows of
-- (conversation, category, last_seq, read_seq, ts, flags, mentions, recalled,
-- preview).
-- Reply per user: user, 'ok'|'moved', drifted (0/1), max drift, n, then n
-- rows of (conversation, unread in Redis, unread in truth).

local tenant = ARGV[1]
local SUMS = {badge = 'badge', muted = 'badge:muted', mentions = 'badge:mentions'}
local out = {}

local function current_state(p)
  local state, categories = {}, {}
  local dir = redis.call('HGETALL', p .. 'dir')
  for i = 1, #dir, 2 do
    local conv, category = dir[i], dir[i + 1]
    categories[category] = true
    local value = redis.call('HGET', conv_key(p, category), conv)
    local s = redis.call('ZSCORE', list_key(p, category), conv)
    state[conv] = {category = category, value = value, st = value and decode_state(value), score = s and tonumber(s)}
  end
  local sums = {}
  for name, key in pairs(SUMS) do
    sums[name] = hash_numbers(p .. key)
    for category in pairs(sums[name]) do categories[category] = true end
  end
  return state, categories, sums
end

local function stored_unread(entry)
  if not entry or not entry.st then return 0 end
  return counted(entry.st).unread
end

-- Compares; returns drifted, max drift, details.
local function compare(truth, order, state, sums)
  local drifted, max_drift, details = false, 0, {}
  local want = {badge = {}, muted = {}, mentions = {}}
  -- max drift is per conversation; a badge out of step is reported, not counted in it.
  local function note(what, redis_unread, truth_unread, is_conversation)
    drifted = true
    local d = math.abs(redis_unread - truth_unread)
    if is_conversation and d > max_drift then max_drift = d end
    if d > 0 then details[#details + 1] = {what, redis_unread, truth_unread} end
  end
  for _, conv in ipairs(order) do
    local t, entry = truth[conv], state[conv]
    local now = counted(t.st)
    for name in pairs(SUMS) do want[name][t.category] = (want[name][t.category] or 0) + now[name] end
    local same = entry and entry.category == t.category and entry.score == score(t.ts, t.last)
      and entry.value == encode_state(t.st)
    if not same then note(conv, stored_unread(entry), now.unread, true) end
  end
  for conv, entry in pairs(state) do
    if not truth[conv] then note(conv, stored_unread(entry), 0, true) end
  end
  for name in pairs(SUMS) do
    for category, sum in pairs(want[name]) do
      local have = sums[name][category] or 0
      if have ~= sum then note(name .. ':' .. category, have, sum, false) end
    end
    for category, sum in pairs(sums[name]) do
      if not want[name][category] and sum ~= 0 then note(name .. ':' .. category, sum, 0, false) end
    end
  end
  return drifted, max_drift, details
end

local function rewrite(p, truth, order, categories)
  for category in pairs(categories) do
    redis.call('DEL', list_key(p, category), conv_key(p, category))
  end
  redis.call('DEL', p .. 'dir', p .. 'badge', p .. 'badge:muted', p .. 'badge:mentions', p .. 'pinned')
  for _, conv in ipairs(order) do
    local t = truth[conv]
    local now = counted(t.st)
    redis.call('HDEL', p .. 'early', conv)
    redis.call('HDEL', p .. 'gone', conv)
    redis.call('HSET', p .. 'dir', conv, t.category)
    redis.call('ZADD', list_key(p, t.category), int(score(t.ts, t.last)), conv)
    redis.call('HSET', conv_key(p, t.category), conv, encode_state(t.st))
    redis.call('HINCRBY', p .. 'badge', t.category, int(now.badge))
    move(p .. 'badge:muted', t.category, now.muted)
    move(p .. 'badge:mentions', t.category, now.mentions)
    if has_flag(t.st, 'p') then redis.call('HSET', p .. 'pinned', conv, t.category) end
  end
end

local i = 2
while i <= #ARGV do
  local user, expected, n = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  i = i + 3
  local truth, order = {}, {}
  for _ = 1, n do
    local conv = ARGV[i]
    local last, read = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
    local st = new_state(last, read, ARGV[i + 8])
    st.flags, st.mentions, st.recalled = ARGV[i + 5], seq_list(ARGV[i + 6]), seq_list(ARGV[i + 7])
    truth[conv] = {category = ARGV[i + 1], last = last, ts = tonumber(ARGV[i + 4]), st = st}
    order[#order + 1] = conv
    i = i + 9
  end
  local p = user_prefix(tenant, user)
  out[#out + 1] = user
  if version(p) ~= expected then
    for _, v in ipairs({'moved', 0, 0, 0}) do out[#out + 1] = v end
  else
    local state, categories, sums = current_state(p)
    local drifted, max_drift, details = compare(truth, order, state, sums)
    if drifted then
      rewrite(p, truth, order, categories)
      publish(tenant, user, nil, nil)
    end
    redis.call('HSET', p .. 'meta', 'loaded', '1')
    bump(p)
    for _, v in ipairs({'ok', drifted and 1 or 0, max_drift, #details}) do out[#out + 1] = v end
    for _, d in ipairs(details) do
      out[#out + 1] = d[1]
      out[#out + 1] = d[2]
      out[#out + 1] = d[3]
    end
  end
end
return out
