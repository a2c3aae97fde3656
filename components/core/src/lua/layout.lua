-- Shared by every script (prepended at build time). The one place that knows
-- the Redis layout, following seed 003: versioned keys, tenant and user in a
-- Cluster hash tag on every key, each category in its own key space.
--
--   un:v1:{T:U}:dir            hash  conversation -> category
--   un:v1:{T:U}:badge          hash  category -> what the badge counts (one field per category in use)
--   un:v1:{T:U}:badge:muted    hash  category -> unread of muted conversations
--   un:v1:{T:U}:badge:mentions hash  category -> unread messages that mention the user
--   un:v1:{T:U}:pinned         hash  conversation -> category (at most max_pins)
--   un:v1:{T:U}:early          hash  conversation -> read cursor recorded before its first touch
--   un:v1:{T:U}:gone           hash  conversation -> 1: deleted, its late touches change nothing
--   un:v1:{T:U}:c:C:list       zset  conversation -> score (ts * 1000 + seq mod 1000)
--   un:v1:{T:U}:c:C:conv       hash  conversation -> "last:read:flags:mentions:recalled:preview"
--   un:v1:{T:U}:meta           hash  v: version, bumped by every change of the user's state;
--                                    loaded: set once the state was (re)built from the SQL store
--
-- flags are letters: m muted, p pinned, u marked unread. mentions and
-- recalled are comma-separated seqs above the read cursor: messages that
-- mention the user, and messages recalled (they no longer count).
--
-- Every change goes through save(), which moves the badge by the difference
-- of what the conversation counts and publishes the change event on
-- `unread:events:<tenant>`.
--
-- Numbers above 1e14 lose digits through Lua's tostring, so every number that
-- goes back to Redis is formatted with int().

local function int(n)
  return string.format('%d', n)
end

local function user_prefix(tenant, user)
  return 'un:v1:{' .. tenant .. ':' .. user .. '}:'
end

local function list_key(p, category)
  return p .. 'c:' .. category .. ':list'
end

local function conv_key(p, category)
  return p .. 'c:' .. category .. ':conv'
end

-- Same-millisecond messages keep their order (seed 000).
local function score(ts, seq)
  return ts * 1000 + seq % 1000
end

local function seq_list(text)
  local out = {}
  for s in string.gmatch(text, '%d+') do out[#out + 1] = tonumber(s) end
  return out
end

-- Ascending and without repeats: one state has one text.
local function seq_text(list)
  local sorted, parts = {}, {}
  for i, s in ipairs(list) do sorted[i] = s end
  table.sort(sorted)
  for _, s in ipairs(sorted) do
    if int(s) ~= parts[#parts] then parts[#parts + 1] = int(s) end
  end
  return table.concat(parts, ',')
end

local function contains(list, seq)
  for _, s in ipairs(list) do
    if s == seq then return true end
  end
  return false
end

-- A conversation as one user sees it.
local function new_state(last, read, preview)
  return {last = last, read = read, flags = '', mentions = {}, recalled = {}, preview = preview}
end

local function encode_state(st)
  return int(st.last) .. ':' .. int(st.read) .. ':' .. st.flags .. ':' .. seq_text(st.mentions) .. ':'
    .. seq_text(st.recalled) .. ':' .. st.preview
end

-- A value that is not in this form (corrupted, or written by hand) reads as
-- an empty conversation: reconcile then rewrites it from the truth.
local function decode_state(value)
  local last, read, flags, mentions, recalled, preview =
    string.match(value, '^(%d+):(%d+):(%a*):([%d,]*):([%d,]*):(.*)$')
  if not last then return new_state(0, 0, '{}') end
  local st = new_state(tonumber(last), tonumber(read), preview)
  st.flags, st.mentions, st.recalled = flags, seq_list(mentions), seq_list(recalled)
  return st
end

local function has_flag(st, flag)
  return string.find(st.flags, flag, 1, true) ~= nil
end

-- Flags are kept in the order m, p, u: one state has one text.
local function set_flag(st, flag, on)
  local flags = ''
  for _, f in ipairs({'m', 'p', 'u'}) do
    if (f == flag and on) or (f ~= flag and has_flag(st, f)) then flags = flags .. f end
  end
  st.flags = flags
end

local function load_state(p, category, conv)
  local value = redis.call('HGET', conv_key(p, category), conv)
  if not value then return nil end
  return decode_state(value)
end

-- What one conversation adds to the badge hashes, and its unread number.
local NOTHING = {unread = 0, badge = 0, muted = 0, mentions = 0}

local function counted(st)
  local unread = st.last - st.read
  for _, s in ipairs(st.recalled) do
    if s > st.read and s <= st.last then unread = unread - 1 end
  end
  if unread < 0 then unread = 0 end
  local mentions = 0
  for _, s in ipairs(st.mentions) do
    if s > st.read and s <= st.last and not contains(st.recalled, s) then mentions = mentions + 1 end
  end
  local muted = has_flag(st, 'm')
  local marked = has_flag(st, 'u') and unread == 0 and not muted
  local badge = 0
  if not muted then badge = unread end
  if marked then badge = 1 end
  return {unread = unread, badge = badge, muted = muted and unread or 0, mentions = mentions}
end

-- Drops seqs at or below the read cursor: they can never count again.
local function prune(st)
  local function above(list)
    local out = {}
    for _, s in ipairs(list) do
      if s > st.read then out[#out + 1] = s end
    end
    return out
  end
  st.mentions, st.recalled = above(st.mentions), above(st.recalled)
end

-- Every change of a user's state bumps its version, so that a rebuild from
-- SQL can tell whether the state moved since it read the truth.
local function bump(p)
  redis.call('HINCRBY', p .. 'meta', 'v', 1)
end

local function version(p)
  return redis.call('HGET', p .. 'meta', 'v') or '0'
end

-- With a SQL store, a user whose state was never loaded (new, or Redis lost
-- it) is a miss: the caller answers from SQL and rebuilds. Returns the miss
-- reply, or nil when the state can be used.
local function miss(p, require_loaded)
  if require_loaded == '1' and not redis.call('HGET', p .. 'meta', 'loaded') then
    return {'miss', version(p)}
  end
  return nil
end

-- Sets a field of a hash that holds at most `max` fields: a new field
-- beyond that evicts an arbitrary other one.
local function bounded_set(key, field, value, max)
  if redis.call('HEXISTS', key, field) == 0 and redis.call('HLEN', key) >= max then
    redis.call('HDEL', key, redis.call('HRANDFIELD', key))
  end
  redis.call('HSET', key, field, value)
end

local function hash_numbers(key)
  local fields, out = redis.call('HGETALL', key), {}
  for i = 1, #fields, 2 do out[fields[i]] = tonumber(fields[i + 1]) end
  return out
end

-- Moves a badge sum; sums that reach 0 leave (the main badge hash keeps its
-- fields: they name the categories in use).
local function move(key, category, delta)
  if delta == 0 then return end
  if redis.call('HINCRBY', key, category, int(delta)) == 0 then redis.call('HDEL', key, category) end
end

-- Flat badge reply: count of categories, then per category: category,
-- counted, muted, mentions.
local function badge_reply(p, out)
  local fields = redis.call('HGETALL', p .. 'badge')
  local muted, mentions = hash_numbers(p .. 'badge:muted'), hash_numbers(p .. 'badge:mentions')
  out[#out + 1] = #fields / 2
  for i = 1, #fields, 2 do
    local category = fields[i]
    out[#out + 1] = category
    out[#out + 1] = fields[i + 1]
    out[#out + 1] = muted[category] or 0
    out[#out + 1] = mentions[category] or 0
  end
  return out
end

local function badge_totals(p)
  local totals = {}
  for name, key in pairs({total = 'badge', muted = 'badge:muted', mentions = 'badge:mentions'}) do
    local sum = 0
    for _, n in ipairs(redis.call('HVALS', p .. key)) do sum = sum + math.max(tonumber(n), 0) end
    totals[name] = sum
  end
  return totals
end

-- The change event for push gateways and the user's other devices; after a
-- whole-state rewrite (conv nil) only the badge.
local function publish(tenant, user, conv, now)
  local p = user_prefix(tenant, user)
  local event = {user = user, conversation = cjson.null, unread = cjson.null, mentions = cjson.null,
                 badge = badge_totals(p)}
  if conv then event.conversation, event.unread, event.mentions = conv, now.unread, now.mentions end
  redis.call('PUBLISH', 'unread:events:' .. tenant, cjson.encode(event))
end

-- Writes a conversation's new state, moves the badge by what changed, bumps
-- the version and, when the badge or the unread number moved, publishes.
local function save(tenant, user, category, conv, before, st)
  local p = user_prefix(tenant, user)
  prune(st)
  redis.call('HSET', conv_key(p, category), conv, encode_state(st))
  local now = counted(st)
  -- HINCRBY even by 0: a new conversation's category must appear in the badge hash.
  redis.call('HINCRBY', p .. 'badge', category, int(now.badge - before.badge))
  move(p .. 'badge:muted', category, now.muted - before.muted)
  move(p .. 'badge:mentions', category, now.mentions - before.mentions)
  bump(p)
  if now.unread ~= before.unread or now.badge ~= before.badge or now.muted ~= before.muted
    or now.mentions ~= before.mentions then
    publish(tenant, user, conv, now)
  end
  return now
end

-- The user has seen everything up to seq: the read cursor never moves back,
-- what arrived after seq stays unread (seed 000's clear rule), a mark-unread
-- flag goes. A cursor ahead of the conversation's first touch is kept in
-- `early` so that the late touch does not count. Returns 'ok' or 'early', the
-- read cursor, what the conversation counts now, and whether anything changed.
local function read_up_to(tenant, user, conv, seq, max_conversations)
  local p = user_prefix(tenant, user)
  local category = redis.call('HGET', p .. 'dir', conv)
  if not category then
    local early = tonumber(redis.call('HGET', p .. 'early', conv) or '0')
    if seq <= early then return 'early', early, NOTHING, false end
    bounded_set(p .. 'early', conv, int(seq), max_conversations)
    bump(p)
    return 'early', seq, NOTHING, true
  end
  local st = load_state(p, category, conv)
  local before = counted(st)
  if seq <= st.read and not has_flag(st, 'u') then return 'ok', st.read, before, false end
  st.read = math.max(st.read, seq)
  set_flag(st, 'u', false)
  return 'ok', st.read, save(tenant, user, category, conv, before, st), true
end

-- Removes one conversation and all its state; what it counted leaves the badge.
local function drop_conversation(p, category, conv)
  local st = load_state(p, category, conv)
  if st then
    local was = counted(st)
    redis.call('HINCRBY', p .. 'badge', category, int(-was.badge))
    move(p .. 'badge:muted', category, -was.muted)
    move(p .. 'badge:mentions', category, -was.mentions)
    redis.call('HDEL', conv_key(p, category), conv)
  end
  redis.call('ZREM', list_key(p, category), conv)
  redis.call('HDEL', p .. 'dir', conv)
  redis.call('HDEL', p .. 'pinned', conv)
  if redis.call('ZCARD', list_key(p, category)) == 0 then
    redis.call('HDEL', p .. 'badge', category)
  end
end

-- Flat conversation row: id, category, last, read, ts, preview, unread,
-- mentions, flags.
local function conversation_row(out, p, category, conv)
  local st = load_state(p, category, conv)
  local s = tonumber(redis.call('ZSCORE', list_key(p, category), conv))
  local now = counted(st)
  for _, v in ipairs({conv, category, int(st.last), int(st.read), int(math.floor(s / 1000)), st.preview,
                      now.unread, now.mentions, st.flags}) do
    out[#out + 1] = v
  end
  return out
end
