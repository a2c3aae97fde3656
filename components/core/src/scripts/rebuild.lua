-- Rewrites users' state from the truth read from SQL where it differs, and
-- reports what a user could see differ (listed conversations, badge sums).
-- A user whose version moved since the truth was read is left alone
-- ('moved'): the caller reads the truth again. Tombstones stay unless the
-- truth has the conversation again. `partial`: the truth holds more than
-- was passed, so a conversation Redis lacks must be read from SQL.
-- `rows`: the user's truth, one row per line, fields separated by NUL:
-- conversation, l (listed) or k (kept), score ('' if none), last, read,
-- flags (m, p, u), category, mention seqs, recalled seqs (comma-separated,
-- above read), and 1 for a large conversation (else empty). Previews are
-- the heads' (written from the truth before), and so are large
-- conversations' logs. A user's large conversations catch
-- up first (what the truth holds, Redis may already have moved past; a
-- state Redis dropped for a partial user waits for the truth instead), and
-- the user is a member of each large conversation the truth gives, from
-- the start of its log (a step that changes nothing the truth already
-- holds): its newer messages reach the user. A rewrite replays every large
-- conversation's log before it publishes: a message that came after the
-- truth was read (the state caught up with it just before) stays counted.
-- On a cluster the logs come whole (from their start) for that replay.
-- A user with nothing in the truth and no keys is left without any unless
-- `load_empty` (they asked themselves). A user whose state and truth differ
-- at all is left alone too ('moved'), unless `settle` (set by every caller
-- but a reconcile before its last attempt): mostly a change is on its way
-- (the app stored a message, its first in a conversation maybe, and has not
-- touched yet; a recall or a mention recorded in the store and not yet in
-- Redis; a large conversation's message that came after the truth was read,
-- which its members' versions do not show), and the caller reads the truth
-- again rather than count the race as drift.
-- Reply per user: user, 'ok' or 'moved', drifted (0/1), largest drift of
-- one conversation's unread, n, then n rows of (what, in Redis, in truth).
local _, A, users = declare {
  args = {'idle_ttl', 'channel', 'load_empty', 'settle', 'max_conversations', 'max_kept', 'logs', 'conversations',
          'clocks'},
  each = {keys = USER_KEYS, args = {'user', 'version', 'partial', 'rows'}},
}
local wanted = take_logs(A, users, true)
if wanted then return wanted end
rebuilding_from_truth()

local function seqs(text)
  local out = {}
  for s in string.gmatch(text, '%d+') do out[#out + 1] = tonumber(s) end
  return out
end

-- The truth: rows in order, with their state and marks as Redis holds them.
local function parse(rows)
  local out = {}
  for line in string.gmatch(rows, '[^\n]+') do
    local conv, where, score, last, read, flags, category, mentions, recalled, large =
      string.match(line,
        '^([^%z]*)%z([lk])%z(%d*)%z(%d+)%z(%d+)%z(%a*)%z([%w_%-]*)%z([%d,]*)%z([%d,]*)%z(1?)$')
    if conv then
      local st = new_state(category)
      st.last, st.read, st.flags, st.score = tonumber(last), tonumber(read), flags, score
      local marks = {}
      for _, s in ipairs(seqs(mentions)) do
        if s > st.read then marks[#marks + 1] = mark(conv, 'm', s) end
        if s > st.read and s <= st.last then st.mentions = st.mentions + 1 end
      end
      for _, s in ipairs(seqs(recalled)) do
        if s > st.read then marks[#marks + 1] = mark(conv, 'r', s) end
        if s > st.read and s <= st.last then st.recalled = st.recalled + 1 end
      end
      table.sort(marks)
      if #marks > 0 then set_flag(st, 'k', true) end
      out[#out + 1] = {conv = conv, listed = where == 'l', st = st, marks = marks, large = large == '1'}
    end
  end
  return out
end

-- The mention and recall marks Redis holds for a conversation (previews an
-- earlier layout kept as marks are not the truth's business).
local function stored_marks(u, conv)
  local out = {}
  for _, m in ipairs(redis.call('ZRANGEBYLEX', u.marks, '[' .. conv .. '\0', '(' .. conv .. '\1')) do
    if string.sub(m, #conv + 2, #conv + 2) ~= 'p' then out[#out + 1] = m end
  end
  return out
end

-- A stored state and the truth's: equal but for a preview an earlier layout
-- kept in the state (the truth's is written into the head).
local function same_state(value, expected)
  if not value then return false end
  local st = decode_state(value)
  st.legacy = nil
  return encode_state(st) == expected
end

local function same_list(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- Whether Redis differs from the truth at all, and what a user could see
-- differ: {what, in Redis, in truth} rows and the largest conversation drift.
local function compare(u, truth)
  local differs_at_all, seen, details, max_drift = false, {}, {}, 0
  local want = {}
  local function note(what, have, should, is_conversation)
    local d = math.abs(have - should)
    if is_conversation and d > max_drift then max_drift = d end
    details[#details + 1] = {what, have, should}
  end
  for _, t in ipairs(truth) do
    seen[t.conv] = true
    -- A state left to this truth by the catch-up (Redis dropped it, or a
    -- log dropped entries it was owed): the user's reads answered from the
    -- truth until now, so it is no drift, and it counts in the badge as
    -- Redis holds it (nothing, if dropped or not listed there).
    local waited = u.waits_for_truth and u.waits_for_truth[t.conv]
    local key = t.listed and u.conv or u.kept
    local value = redis.call('HGET', key, t.conv)
    local stored = t.st.score
    if t.listed then stored = '' end
    local expected = encode_state({last = t.st.last, read = t.st.read, mentions = t.st.mentions,
      recalled = t.st.recalled, flags = t.st.flags, category = t.st.category, score = stored})
    local score = redis.call('ZSCORE', u.list, t.conv)
    local same = same_state(value, expected) and same_list(stored_marks(u, t.conv), t.marks)
      and ((t.listed and score == t.st.score) or (not t.listed and not score))
    if not same then
      differs_at_all = true
      -- What the user saw came from the truth: the event goes out whether
      -- or not that differed.
      if waited then u.waited_differs = true end
      if t.listed and not waited then
        local have = 0
        local held = redis.call('HGET', u.conv, t.conv)
        if held then have = counted(decode_state(held)).unread end
        if have ~= counted(t.st).unread or not same_state(value, expected) or score ~= t.st.score then
          note(t.conv, have, counted(t.st).unread, true)
        end
      end
    end
    local now
    if not waited then
      now = t.listed and counted(t.st)
    else
      local held = redis.call('HGET', u.conv, t.conv)
      now = held and counted(decode_state(held))
    end
    if now then
      for field, n in pairs({[''] = now.badge, [':m'] = now.muted, [':@'] = now.mentions}) do
        local name = t.st.category .. field
        want[name] = (want[name] or 0) + n
      end
    end
  end
  local listed = redis.call('HGETALL', u.conv)
  for i = 1, #listed, 2 do
    if not seen[listed[i]] then
      differs_at_all = true
      note(listed[i], counted(decode_state(listed[i + 1])).unread, 0, true)
    end
  end
  local kept = redis.call('HGETALL', u.kept)
  for i = 1, #kept, 2 do
    if not seen[kept[i]] and not has_flag(decode_state(kept[i + 1]), 'x') then differs_at_all = true end
  end
  local fields = redis.call('HGETALL', u.badge)
  local have = {}
  for i = 1, #fields, 2 do have[fields[i]] = tonumber(fields[i + 1]) end
  for name, n in pairs(want) do
    if (have[name] or 0) ~= n then
      differs_at_all = true
      note('badge:' .. name, have[name] or 0, n, false)
    end
  end
  for name, n in pairs(have) do
    if want[name] == nil and n ~= 0 then
      differs_at_all = true
      note('badge:' .. name, n, 0, false)
    end
  end
  return differs_at_all, details, max_drift
end

local function rewrite(u, truth)
  local tombstones = {}
  local kept = redis.call('HGETALL', u.kept)
  for i = 1, #kept, 2 do
    if has_flag(decode_state(kept[i + 1]), 'x') then tombstones[kept[i]] = kept[i + 1] end
  end
  for _, t in ipairs(truth) do tombstones[t.conv] = nil end
  redis.call('DEL', u.list, u.conv, u.kept, u.age, u.badge, u.pinned, u.marks)
  local stamp = tonumber(version(u)) - #truth
  for conv, value in pairs(tombstones) do
    redis.call('HSET', u.kept, conv, value)
    redis.call('ZADD', u.age, stamp, conv)
  end
  for i = #truth, 1, -1 do
    local t = truth[i]
    for _, m in ipairs(t.marks) do redis.call('ZADD', u.marks, 0, m) end
    if t.listed then
      redis.call('ZADD', u.list, t.st.score, t.conv)
      if has_flag(t.st, 'p') then redis.call('HSET', u.pinned, t.conv, '1') end
      local score = t.st.score
      t.st.score = ''
      redis.call('HSET', u.conv, t.conv, encode_state(t.st))
      t.st.score = score
      move_badge(u, t.st.category, NOTHING, counted(t.st))
    else
      redis.call('HSET', u.kept, t.conv, encode_state(t.st))
      redis.call('ZADD', u.age, stamp + #truth - i, t.conv)
    end
  end
end

-- The user's memberships are the large conversations of the truth; of a
-- partial truth (beyond what is kept), those it gives and those kept.
local function join_large_ones(u, truth)
  local large = {}
  for _, t in ipairs(truth) do
    if t.large then
      large[t.conv] = true
      if redis.call('HEXISTS', u.groups, t.conv) == 0 then join_large(u, t.conv, 0) end
    end
  end
  if u.partial == '1' then return end
  local groups = redis.call('HKEYS', u.groups)
  for _, conv in ipairs(groups) do
    if not large[conv] then redis.call('HDEL', u.groups, conv) end
  end
end

local out = {}
for _, u in ipairs(users) do
  out[#out + 1] = u.user
  if version(u) ~= u.version then
    for _, v in ipairs({'moved', 0, 0, 0}) do out[#out + 1] = v end
  elseif A.load_empty ~= '1' and u.rows == ''
    and redis.call('EXISTS', u.list, u.conv, u.kept, u.age, u.badge, u.pinned, u.marks, u.meta) == 0 then
    -- Nothing in the truth and nothing here, and named by another caller (a
    -- leave or delete for a stranger, say): no keys; staying unloaded, the
    -- user's next read asks SQL, which answers nothing as cheaply.
    for _, v in ipairs({'ok', 0, 0, 0}) do out[#out + 1] = v end
  else
    comparing(true)
    catch_up(u, A.max_conversations, A.max_kept)
    local truth = parse(u.rows)
    local differs_at_all, details, max_drift = compare(u, truth)
    comparing(false)
    if differs_at_all and A.settle ~= '1' then
      for _, v in ipairs({'moved', 0, 0, 0}) do out[#out + 1] = v end
    else
      if differs_at_all then rewrite(u, truth) end
      join_large_ones(u, truth)
      -- A state left to the truth that the truth does not give (beyond what
      -- it passed, or a row it could not read) stays there: the record
      -- moves past what came, as a catch-up below the list does, rather
      -- than send every call of the user back to the truth.
      if u.partial == '1' then
        local given = {}
        for _, t in ipairs(truth) do given[t.conv] = true end
        for conv, counter in pairs(u.waits_for_truth or {}) do
          if not given[conv] then join_large(u, conv, counter) end
        end
      end
      if differs_at_all or u.owed_truth then
        -- The truth may be older than a large conversation's log: what came
        -- since (and the state had caught up with) comes back, and what the
        -- truth already holds changes nothing (nor does what a log dropped).
        for _, t in ipairs(truth) do
          if t.large then join_large(u, t.conv, 0) end
        end
        catch_up(u, A.max_conversations, A.max_kept)
        if #details > 0 or u.waited_differs then publish(A.channel, u.user, nil, nil, u) end
      end
      redis.call('HSET', u.meta, 'loaded', '1')
      if redis.call('ZCARD', u.list) > 0 then redis.call('PERSIST', u.meta) else idle(u, A.idle_ttl) end
      if u.partial == '1' then redis.call('HSET', u.meta, 'partial', '1') else redis.call('HDEL', u.meta, 'partial') end
      bump(u)
      for _, v in ipairs({'ok', #details > 0 and 1 or 0, max_drift, #details}) do out[#out + 1] = v end
      for _, d in ipairs(details) do
        out[#out + 1] = d[1]
        out[#out + 1] = d[2]
        out[#out + 1] = d[3]
      end
    end
  end
end
return out
