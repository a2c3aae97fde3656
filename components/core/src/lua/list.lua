-- One page of the user's conversations, newest first across categories, and
-- the badge. ARGV: tenant, user, limit, cursor score ('' for the first page),
-- cursor conversation, require_loaded ('1' with a SQL store). Order is (score desc, conversation desc): a total
-- order, so paging returns every conversation exactly once while nothing
-- changes.

local p = user_prefix(ARGV[1], ARGV[2])
local missed = miss(p, ARGV[6])
if missed then return missed end
local limit = tonumber(ARGV[3])
local after_score, after_conv = tonumber(ARGV[4]), ARGV[5]

local function comes_after(s, conv)
  return not after_score or s < after_score or (s == after_score and conv < after_conv)
end

-- Up to limit + 1 candidates from one category, strictly after the cursor.
local function candidates(category, out)
  local key = list_key(p, category)
  local rows
  if after_score then
    local bound = int(after_score)
    local ties = redis.call('ZCOUNT', key, bound, bound)
    rows = redis.call('ZREVRANGEBYSCORE', key, bound, '-inf', 'WITHSCORES', 'LIMIT', 0, limit + 1 + ties)
  else
    rows = redis.call('ZREVRANGE', key, 0, limit, 'WITHSCORES')
  end
  for i = 1, #rows, 2 do
    local s = tonumber(rows[i + 1])
    if comes_after(s, rows[i]) then out[#out + 1] = {s, rows[i], category} end
  end
end

local badge = redis.call('HGETALL', p .. 'badge')
local rows = {}
for i = 1, #badge, 2 do candidates(badge[i], rows) end
table.sort(rows, function(a, b)
  if a[1] ~= b[1] then return a[1] > b[1] end
  return a[2] > b[2]
end)

local count = math.min(limit, #rows)
local next_cursor = ''
if #rows > limit then next_cursor = int(rows[count][1]) .. '.' .. rows[count][2] end

local out = badge_reply(p, {'ok', next_cursor})
out[#out + 1] = count
for i = 1, count do
  local s, conv, category = rows[i][1], rows[i][2], rows[i][3]
  local last, read, preview = decode_state(redis.call('HGET', conv_key(p, category), conv))
  out[#out + 1] = conv
  out[#out + 1] = category
  out[#out + 1] = int(last)
  out[#out + 1] = int(read)
  out[#out + 1] = int(math.floor(s / 1000))
  out[#out + 1] = preview
end
return out
