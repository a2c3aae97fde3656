-- One page of the user's conversations and the badge: pinned first, then the
-- rest, each newest first. ARGV: tenant, user, limit, cursor section ('' for
-- the first page, '1' pinned, '0' the rest), cursor score, cursor
-- conversation, category ('' for all), require_loaded ('1' with a SQL store).
-- Order is (section, score, conversation) descending: a total order, so
-- paging returns every conversation exactly once while nothing changes.

local p = user_prefix(ARGV[1], ARGV[2])
local missed = miss(p, ARGV[8])
if missed then return missed end
local limit = tonumber(ARGV[3])
local after_section, after_score, after_conv = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local only = ARGV[7]

local function comes_after(section, s, conv)
  if not after_section or section < after_section then return true end
  if section > after_section then return false end
  return s < after_score or (s == after_score and conv < after_conv)
end

local function keep(out, section, s, conv, category)
  if comes_after(section, s, conv) then out[#out + 1] = {section, s, conv, category} end
end

local pinned = {}
local pins = redis.call('HGETALL', p .. 'pinned')
for i = 1, #pins, 2 do pinned[pins[i]] = pins[i + 1] end
local pin_count = #pins / 2

-- Up to limit + 1 unpinned candidates from one category, after the cursor.
local function candidates(category, out)
  local key = list_key(p, category)
  local rows
  local extra = limit + 1 + pin_count
  if after_section == 0 then
    local bound = int(after_score)
    local ties = redis.call('ZCOUNT', key, bound, bound)
    rows = redis.call('ZREVRANGEBYSCORE', key, bound, '-inf', 'WITHSCORES', 'LIMIT', 0, extra + ties)
  else
    rows = redis.call('ZREVRANGE', key, 0, extra - 1, 'WITHSCORES')
  end
  for i = 1, #rows, 2 do
    if not pinned[rows[i]] then keep(out, 0, tonumber(rows[i + 1]), rows[i], category) end
  end
end

local rows = {}
for conv, category in pairs(pinned) do
  if only == '' or only == category then
    keep(rows, 1, tonumber(redis.call('ZSCORE', list_key(p, category), conv)), conv, category)
  end
end
if only ~= '' then
  if redis.call('HEXISTS', p .. 'badge', only) == 1 then candidates(only, rows) end
else
  for _, category in ipairs(redis.call('HKEYS', p .. 'badge')) do candidates(category, rows) end
end
table.sort(rows, function(a, b)
  if a[1] ~= b[1] then return a[1] > b[1] end
  if a[2] ~= b[2] then return a[2] > b[2] end
  return a[3] > b[3]
end)

local count = math.min(limit, #rows)
local next_cursor = ''
if #rows > limit then
  local last = rows[count]
  next_cursor = int(last[1]) .. '.' .. int(last[2]) .. '.' .. last[3]
end

local out = badge_reply(p, {'ok', next_cursor})
out[#out + 1] = count
for i = 1, count do conversation_row(out, p, rows[i][4], rows[i][3]) end
return out
