-- One page of the user's conversations and the badge: pinned first, then the
-- rest, each newest first; with a category, that category's only. The order
-- is (section, score, conversation) descending, section 1 pinned: a total
-- order, so paging returns every conversation exactly once while nothing
-- changes. The cursor is the last row served ('' section: the first page).
-- Reply: a miss ({'miss', version}) or {'ok', more (0/1), badge..., count,
-- rows...} (rows as conversation_row; a next page starts after the last).
local U, A = declare {
  keys = USER_KEYS,
  args = {'limit', 'section', 'score', 'conversation', 'category', 'require_loaded', 'max_conversations', 'max_kept',
          'head_ttl', 'logs', 'conversations', 'clocks'},
}
local wanted = take_logs(A, {U})
if wanted then return wanted end
if not caught_up(U, A) then return {'miss', version(U)} end
local limit, only = tonumber(A.limit), A.category
local after_section, after_score, after_conv = tonumber(A.section), tonumber(A.score), A.conversation

local function comes_after(section, s, conv)
  if not after_section or section < after_section then return true end
  if section > after_section then return false end
  return s < after_score or (s == after_score and conv < after_conv)
end

local function wanted(st)
  return only == '' or st.category == only
end

-- Rows: {section, score, conversation, state}.
local rows = {}
local pinned = redis.call('HKEYS', U.pinned)
local is_pinned = {}
for _, conv in ipairs(pinned) do
  is_pinned[conv] = true
  local s = tonumber(redis.call('ZSCORE', U.list, conv))
  local value = redis.call('HGET', U.conv, conv)
  if s and value and comes_after(1, s, conv) then
    local st = decode_state(value)
    if wanted(st) then rows[#rows + 1] = {1, s, conv, st} end
  end
end

-- Unpinned rows after the cursor, newest first, until one more than a page
-- is found (that one only tells that a next page exists).
local top = '+inf'
if after_section == 0 then top = int(after_score) end
local found, offset, batch = 0, 0, limit + 1 + #pinned
while found <= limit do
  local candidates = redis.call('ZREVRANGEBYSCORE', U.list, top, '-inf', 'WITHSCORES', 'LIMIT', offset, batch)
  if #candidates == 0 then break end
  offset = offset + #candidates / 2
  local names = {}
  for i = 1, #candidates, 2 do names[#names + 1] = candidates[i] end
  local values = redis.call('HMGET', U.conv, unpack(names))
  for i, conv in ipairs(names) do
    local s = tonumber(candidates[2 * i])
    if not is_pinned[conv] and values[i] and comes_after(0, s, conv) then
      local st = decode_state(values[i])
      if wanted(st) and found <= limit then
        rows[#rows + 1] = {0, s, conv, st}
        found = found + 1
      end
    end
  end
  if #candidates < 2 * batch then break end
end

table.sort(rows, function(a, b)
  if a[1] ~= b[1] then return a[1] > b[1] end
  if a[2] ~= b[2] then return a[2] > b[2] end
  return a[3] > b[3]
end)

local count = math.min(limit, #rows)
local out = badge_reply(U, {'ok', #rows > limit and 1 or 0})
out[#out + 1] = count
local convs = {}
for i = 1, count do convs[i] = rows[i][3] end
local heads = page_heads(convs)
for i = 1, count do conversation_row(out, U, rows[i][3], rows[i][4], int(rows[i][2]), A.head_ttl, heads[i]) end
return out
