-- Rewrites users' state from the truth read from SQL, when it differs, and
-- reports the drift. A user whose version moved since the truth was read is
-- left alone ('moved'): the caller reads the truth again.
-- ARGV: tenant, then per user: user, expected version, n, then n rows of
-- (conversation, category, last_seq, read_seq, ts, preview).
-- Reply per user: user, 'ok'|'moved', drifted (0/1), max drift, n, then n
-- rows of (conversation, unread in Redis, unread in truth).

local tenant = ARGV[1]
local out = {}

local function current_state(p)
  local state, categories = {}, {}
  local dir = redis.call('HGETALL', p .. 'dir')
  for i = 1, #dir, 2 do
    local conv, category = dir[i], dir[i + 1]
    categories[category] = true
    local value = redis.call('HGET', conv_key(p, category), conv)
    local s = redis.call('ZSCORE', list_key(p, category), conv)
    state[conv] = {category = category, value = value, score = s and tonumber(s)}
  end
  local badge = redis.call('HGETALL', p .. 'badge')
  local badge_sums = {}
  for i = 1, #badge, 2 do
    categories[badge[i]] = true
    badge_sums[badge[i]] = tonumber(badge[i + 1])
  end
  return state, categories, badge_sums
end

local function stored_unread(entry)
  if not entry or not entry.value then return 0 end
  local last, read = decode_state(entry.value)
  return unread(last, read)
end

-- Compares; returns drifted, max drift, details.
local function compare(truth, order, state, badge_sums)
  local drifted, max_drift, details = false, 0, {}
  local sums = {}
  -- max drift is per conversation; a badge out of step is reported, not counted in it.
  local function note(what, redis_unread, truth_unread, is_conversation)
    drifted = true
    local d = math.abs(redis_unread - truth_unread)
    if is_conversation and d > max_drift then max_drift = d end
    if d > 0 then details[#details + 1] = {what, redis_unread, truth_unread} end
  end
  for _, conv in ipairs(order) do
    local t, entry = truth[conv], state[conv]
    sums[t.category] = (sums[t.category] or 0) + unread(t.last, t.read)
    local same = entry and entry.category == t.category and entry.score == score(t.ts, t.last)
      and entry.value == encode_state(t.last, t.read, t.preview)
    if not same then note(conv, stored_unread(entry), unread(t.last, t.read), true) end
  end
  for conv, entry in pairs(state) do
    if not truth[conv] then note(conv, stored_unread(entry), 0, true) end
  end
  for category, sum in pairs(sums) do
    if badge_sums[category] ~= sum then note('badge:' .. category, badge_sums[category] or 0, sum, false) end
  end
  for category, sum in pairs(badge_sums) do
    if not sums[category] and sum ~= 0 then note('badge:' .. category, sum, 0, false) end
  end
  return drifted, max_drift, details
end

local function rewrite(p, truth, order, categories)
  for category in pairs(categories) do
    redis.call('DEL', list_key(p, category), conv_key(p, category))
  end
  redis.call('DEL', p .. 'dir', p .. 'badge')
  for _, conv in ipairs(order) do
    local t = truth[conv]
    redis.call('HDEL', p .. 'early', conv)
    redis.call('HSET', p .. 'dir', conv, t.category)
    redis.call('ZADD', list_key(p, t.category), int(score(t.ts, t.last)), conv)
    redis.call('HSET', conv_key(p, t.category), conv, encode_state(t.last, t.read, t.preview))
    redis.call('HINCRBY', p .. 'badge', t.category, int(unread(t.last, t.read)))
  end
end

local i = 2
while i <= #ARGV do
  local user, expected, n = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  i = i + 3
  local truth, order = {}, {}
  for _ = 1, n do
    local conv = ARGV[i]
    truth[conv] = {category = ARGV[i + 1], last = tonumber(ARGV[i + 2]), read = tonumber(ARGV[i + 3]),
                   ts = tonumber(ARGV[i + 4]), preview = ARGV[i + 5]}
    order[#order + 1] = conv
    i = i + 6
  end
  local p = user_prefix(tenant, user)
  out[#out + 1] = user
  if version(p) ~= expected then
    out[#out + 1] = 'moved'
    out[#out + 1] = 0
    out[#out + 1] = 0
    out[#out + 1] = 0
  else
    local state, categories, badge_sums = current_state(p)
    local drifted, max_drift, details = compare(truth, order, state, badge_sums)
    if drifted then rewrite(p, truth, order, categories) end
    redis.call('HSET', p .. 'meta', 'loaded', '1')
    bump(p)
    out[#out + 1] = 'ok'
    out[#out + 1] = drifted and 1 or 0
    out[#out + 1] = max_drift
    out[#out + 1] = #details
    for _, d in ipairs(details) do
      out[#out + 1] = d[1]
      out[#out + 1] = d[2]
      out[#out + 1] = d[3]
    end
  end
end
return out
