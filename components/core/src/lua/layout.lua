-- Shared by every script (prepended at build time). The one place that knows
-- the Redis layout, following seed 003: versioned keys, tenant and user in a
-- Cluster hash tag on every key, each category in its own key space.
--
--   un:v1:{T:U}:dir          hash  conversation -> category
--   un:v1:{T:U}:badge        hash  category -> sum of unread (one field per category in use)
--   un:v1:{T:U}:early        hash  conversation -> read cursor recorded before its first touch
--   un:v1:{T:U}:c:C:list     zset  conversation -> score (ts * 1000 + seq mod 1000)
--   un:v1:{T:U}:c:C:conv     hash  conversation -> "last_seq:read_seq:preview-json"
--   un:v1:{T:U}:meta         hash  v: version, bumped by every change of the user's state;
--                                  loaded: set once the state was (re)built from the SQL store
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

local function unread(last, read)
  if last > read then return last - read end
  return 0
end

local function encode_state(last, read, preview)
  return int(last) .. ':' .. int(read) .. ':' .. preview
end

local function decode_state(value)
  local last, read, preview = string.match(value, '^(%d+):(%d+):(.*)$')
  return tonumber(last), tonumber(read), preview
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

-- Flat badge reply: count of categories, then category, unread pairs.
local function badge_reply(p, out)
  local fields = redis.call('HGETALL', p .. 'badge')
  out[#out + 1] = #fields / 2
  for i = 1, #fields do out[#out + 1] = fields[i] end
  return out
end

-- Removes one conversation and all its state; its unread leaves the badge.
local function drop_conversation(p, category, conv)
  local value = redis.call('HGET', conv_key(p, category), conv)
  if value then
    local last, read = decode_state(value)
    redis.call('HINCRBY', p .. 'badge', category, int(-unread(last, read)))
    redis.call('HDEL', conv_key(p, category), conv)
  end
  redis.call('ZREM', list_key(p, category), conv)
  redis.call('HDEL', p .. 'dir', conv)
  if redis.call('ZCARD', list_key(p, category)) == 0 then
    redis.call('HDEL', p .. 'badge', category)
  end
end
