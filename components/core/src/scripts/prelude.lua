-- Shared by every script (prepended at build time): the calling convention,
-- the state of one conversation as one user sees it, and the few steps
-- every change goes through (a few scripts take only its base, up to BASE
-- END: see base_prelude in script.rs). Key names are not built here: the Rust side
-- (keys.rs) passes every key a script touches in KEYS.
--
-- A user's keys (USER_KEYS, one hash slot):
--   list    zset  listed conversation -> list score (newest max_conversations; pinned ones stay)
--   conv    hash  listed conversation -> state
--   kept    hash  conversation not listed -> state with its score: trimmed ones keep
--                 their cursor, flags and marks; cursors that came before a first
--                 touch (read, join, recall); tombstones of left or deleted ones
--   age     zset  kept conversation -> the user's version when it was last kept:
--                 the oldest goes first when more than max_kept are kept
--   badge   hash  <category> -> what the badge counts, <category>:m -> unread of
--                 muted conversations, <category>:@ -> unread mentions
--   pinned  hash  pinned conversation -> 1 (at most max_pins)
--   marks   zset  (lexicographic) <conversation> NUL <kind> <seq, 16 digits>:
--                 m: a mention, r: a recalled message (p: a preview an earlier
--                 layout kept here; pruned like the others)
--   meta    hash  v: version, bumped by every change (with a SQL store, by every
--                 setting call and mark-read too); loaded: built from the SQL
--                 store; partial: the truth holds more than Redis kept
--   groups  hash  large conversation -> how far in its log the user's state
--                 has caught up (see catch_up; the conversation's keys are
--                 named from its identifier, conversation_keys)
--
-- A conversation's keys (CONVERSATION_KEYS, one hash slot): head, its last
-- message (seq, list score, category, preview); recalls, seq -> the preview a
-- recall gave for a message whose touch has not come yet; earlier, on Redis
-- Cluster, the messages the head held before (one string, newest first, a
-- few, for seconds: there a list page reads its rows, then their previews
-- from the heads' slots, and a message may come in between; on one Redis
-- it reads both in one step). Previews live there once per conversation,
-- never in a user's state. group, only for a large conversation (read
-- diffusion): a zset, the log of its recalls (`r<seq>`) and @all mentions
-- (`a<seq>`) scored by a counter, and the counter itself as `#`, moved by
-- every message and entry, never to a value it held (move_counter); the
-- log keeps the newest LOG_ENTRIES, and as `~` the counter of the newest
-- entry it dropped. joined, while the conversation
-- is not large: who joined it in the last JOINERS_SECONDS (a zset scored by
-- the time), for the message that makes it large (record_joiners).
-- unannounced, only for a large conversation: the seq of a message a
-- rebuild wrote into the head from the truth before the message's touch
-- came, for UNANNOUNCED_SECONDS: the touch, finding the head already there,
-- announces it then (note_unannounced).
--
-- A state is `last:read:mentions:recalled:flags:category:score`:
-- mentions and recalled count the marks in (read, last]; flags are letters in
-- this order: k (the conversation has marks), m (muted), p (pinned), u
-- (marked unread), x (left or deleted: a tombstone); score is empty while
-- the conversation is listed (the list zset holds it).
--
-- Numbers above 1e14 lose digits through Lua's tostring, so every number that
-- goes back to Redis is formatted with int().

local USER_KEYS = {'list', 'conv', 'kept', 'age', 'badge', 'pinned', 'marks', 'meta', 'groups'}
local CONVERSATION_KEYS = {'head', 'recalls', 'earlier', 'group', 'joined', 'unannounced'}

-- On Redis Cluster the parts of one call that one node serves may come as
-- one call (parts_together in script.rs): no KEYS, since Redis refuses a
-- script whose declared keys span slots, and ARGV led by NODE_PARTS, the
-- length of each run of keys of one slot, the keys, then the arguments.
-- Every key is looked at before the script writes anything: where this node
-- does not serve one (its slot moved, or is moving and the key went ahead),
-- the call fails with ELSEWHERE, unwritten, and the client sends the parts
-- one slot at a time. Returns the keys and the arguments.
local NODE_PARTS = '\0node-parts'

local function keys_and_args()
  if #KEYS > 0 or ARGV[1] ~= NODE_PARTS then return KEYS, ARGV end
  local keys, args, at = {}, {}, 3
  for run in string.gmatch(ARGV[2], '%d+') do
    local first = at
    at = at + tonumber(run)
    local seen = redis.pcall('EXISTS', unpack(ARGV, first, at - 1))
    if type(seen) == 'table' and seen.err then
      return error({err = 'ELSEWHERE a key of this call is not served here'})
    end
    for i = first, at - 1 do keys[#keys + 1] = ARGV[i] end
  end
  for i = at, #ARGV do args[#args + 1] = ARGV[i] end
  return keys, args
end

-- Names KEYS and ARGV as the script's header declares them: fixed keys and
-- arguments first, then `each` repeated once per item (a member, a user).
-- Returns the keys, the arguments and the items (each with its keys and
-- arguments by name). The Rust definition of the script encodes exactly this
-- (a unit test compares the two). On Redis Cluster a call is sent in parts,
-- one per hash slot, and a part whose items are not in the fixed keys' slot
-- comes without them: then the keys returned are nil (only a script whose
-- items have arguments can tell, so only such a script may be split so).
local function declare(spec)
  local KEYS, ARGV = keys_and_args()
  local fixed_keys, fixed_args = spec.keys or {}, spec.args or {}
  local named_keys, named_args, items = {}, {}, {}
  local each_keys = spec.each and spec.each.keys or {}
  local each_args = spec.each and spec.each.args or {}
  local extra_args = #ARGV - #fixed_args
  local n = 0
  if #each_args > 0 then
    n = extra_args / #each_args
  elseif #each_keys > 0 then
    n = (#KEYS - #fixed_keys) / #each_keys
  end
  local with_fixed = #KEYS == #fixed_keys + n * #each_keys
  local without_fixed = #fixed_keys > 0 and #each_args > 0 and #KEYS == n * #each_keys
  if n ~= math.floor(n) or n < 0 or extra_args ~= n * #each_args or not (with_fixed or without_fixed) then
    return error('calling convention: ' .. #KEYS .. ' keys and ' .. #ARGV .. ' arguments do not fit the header')
  end
  local base = 0
  if with_fixed then
    base = #fixed_keys
    for i, name in ipairs(fixed_keys) do named_keys[name] = KEYS[i] end
  else
    named_keys = nil
  end
  for i, name in ipairs(fixed_args) do named_args[name] = ARGV[i] end
  for g = 1, n do
    local item = {}
    for i, name in ipairs(each_keys) do item[name] = KEYS[base + (g - 1) * #each_keys + i] end
    for i, name in ipairs(each_args) do item[name] = ARGV[#fixed_args + (g - 1) * #each_args + i] end
    items[g] = item
  end
  return named_keys, named_args, items
end

local function int(n)
  return string.format('%d', n)
end

-- Heads ---------------------------------------------------------------------

-- Recall previews kept for messages not touched yet: at most this many per
-- conversation (the lowest seqs go first), so no caller grows them.
local MAX_PENDING_PREVIEWS = 16

-- The messages a head held before, kept for a list that read its rows just
-- before the head moved on: this many, for this many seconds after the last
-- message. Enough for the milliseconds between a page's two reads, whatever
-- the conversation's pace.
local RECENT_PREVIEWS, RECENT_SECONDS = 8, 10

-- A conversation's head, `seq:score:category:preview` in one string (a
-- string keeps a long preview compact, where a hash would turn into a
-- table); nil if there is none.
local function decode_head(value)
  if not value or value == '' then return nil end
  local seq, score, category, preview = string.match(value, '^(%d+):(%d*):([%w_%-]*):(.*)$')
  if not seq then return nil end
  return {seq = tonumber(seq), score = score, category = category, preview = preview}
end

local function get_head(key)
  return decode_head(redis.call('GET', key))
end

-- The head's text, as `get_head` reads it.
local function encode_head(seq, score, category, preview)
  return int(seq) .. ':' .. score .. ':' .. category .. ':' .. preview
end

-- The messages the head held before, newest first, as {seq, preview}
-- pairs: one string of `seq:length:preview` items (a preview may hold any
-- byte), so that a message writes it once.
local function earlier_items(h)
  local text, items, at = redis.call('GET', h.earlier) or '', {}, 1
  while at <= #text do
    local seq, length, start = string.match(text, '^(%d+):(%d+):()', at)
    if not seq then break end
    local stop = start + tonumber(length)
    items[#items + 1] = {tonumber(seq), string.sub(text, start, stop - 1)}
    at = stop
  end
  return items
end

-- Writes the earlier messages, `...` the SET options (a time to live, or
-- KEEPTTL).
local function set_earlier(h, items, ...)
  local parts = {}
  for i, item in ipairs(items) do parts[i] = int(item[1]) .. ':' .. #item[2] .. ':' .. item[2] end
  redis.call('SET', h.earlier, table.concat(parts), ...)
end

-- The conversation's last message is `seq` (list score `score`, in
-- `category`), with `preview`. A head lives `ttl` seconds past its last
-- message or its last read by a list (previews.lua), so heads of
-- conversations nobody lists any more go.
local function set_head(key, seq, score, category, preview, ttl)
  redis.call('SET', key, encode_head(seq, score, category, preview), 'EX', ttl)
end

-- Recall previews below the head's message `seq` can no longer serve and
-- go; the head's own stays (see recall_preview).
local function prune_recalls(recalls, seq)
  for _, f in ipairs(redis.call('HKEYS', recalls)) do
    if tonumber(f) < seq then redis.call('HDEL', recalls, f) end
  end
end

-- The conversation's last message is now `seq` if it is newer than the
-- head's: its preview is the one a recall left for it, else `preview`.
-- With `keep_earlier` the head's message before goes to its earlier ones
-- (on Redis Cluster, where a list reads its rows and then their previews);
-- on one Redis a list reads both in one step, so no message comes between.
-- Returns whether the head moved, and its seq now.
local function advance_head(h, seq, score, category, preview, ttl, keep_earlier)
  local head = get_head(h.head)
  if head and seq <= head.seq then return false, head.seq end
  if head and keep_earlier then
    local items = earlier_items(h)
    table.insert(items, 1, {head.seq, head.preview})
    items[RECENT_PREVIEWS + 1] = nil
    set_earlier(h, items, 'EX', RECENT_SECONDS)
  end
  if redis.call('HLEN', h.recalls) > 0 then
    preview = redis.call('HGET', h.recalls, int(seq)) or preview
    prune_recalls(h.recalls, seq)
  end
  set_head(h.head, seq, score, category, preview, ttl)
  return true, seq
end

-- How long a rebuild's note of a large conversation's message it wrote
-- into the head waits for the message's touch: a day, for an app that
-- sends a touch again after an outage.
local UNANNOUNCED_SECONDS = 24 * 3600

-- A rebuild wrote message `seq` into a large conversation's head (`h`, its
-- keys), from the truth. Whether the message was announced, it cannot tell:
-- its touch may be on its way, or may have come before Redis lost the
-- conversation. So the rebuild announces nothing, and leaves this note for
-- the touch: the touch finds the head already at its message, which would
-- otherwise be a touch sent again, and announces it by the note. A touch
-- that came before Redis lost it comes again only if the app sends it
-- again (after a 503): then its event may come twice.
local function note_unannounced(h, seq)
  redis.call('SET', h.unannounced, int(seq), 'EX', UNANNOUNCED_SECONDS)
end

-- Whether message `seq` is the one a rebuild noted and nobody announced
-- yet; with `take` the note goes, for the caller to announce it (on Redis
-- Cluster the caller announces it in a later step, and the note goes
-- once that is done: forget_unannounced.lua).
local function unannounced(h, seq, take)
  if redis.call('GET', h.unannounced) ~= int(seq) then return false end
  if take then redis.call('DEL', h.unannounced) end
  return true
end

-- The preview of message `seq` if the head (as `get_head` read it) or its
-- earlier messages hold it; nil otherwise (and, with `replace`, replaced
-- there).
local function held_preview(h, head, seq, replace)
  if not head or seq > head.seq then return nil end
  if seq == head.seq then
    if replace then redis.call('SET', h.head, encode_head(seq, head.score, head.category, replace), 'KEEPTTL') end
    return head.preview
  end
  local items = earlier_items(h)
  for _, item in ipairs(items) do
    if item[1] == seq then
      local text = item[2]
      if replace then
        item[2] = replace
        set_earlier(h, items, 'KEEPTTL')
      end
      return text
    end
  end
  return nil
end

-- A recall's replacement preview for message `seq`: the head's preview if
-- it is the last message (and an earlier one's if it was); kept for its touch
-- if it is newer, and for a rebuild's heads if it is the last.
local function recall_preview(h, seq, preview, ttl)
  local head = get_head(h.head)
  if head and seq < head.seq then
    held_preview(h, head, seq, preview)
  else
    -- Kept for the head's own message too, until the next message: a
    -- rebuild's truth read before the recall does not bring the text back.
    if head and seq == head.seq then held_preview(h, head, seq, preview) end
    redis.call('HSET', h.recalls, int(seq), preview)
    redis.call('EXPIRE', h.recalls, ttl)
    local pending = {}
    for _, f in ipairs(redis.call('HKEYS', h.recalls)) do pending[#pending + 1] = tonumber(f) end
    table.sort(pending)
    for i = 1, #pending - MAX_PENDING_PREVIEWS do redis.call('HDEL', h.recalls, int(pending[i])) end
  end
end

-- The preview a row whose last message is `last` shows, from head `h` (its
-- `head` and `earlier` keys): '' if neither holds that message (the member
-- was not told of the conversation's newer messages, and no preview of
-- theirs is kept for them). A head read here lives on: its time to live is
-- renewed once half of `ttl` has passed (a read, mostly, not a write), which
-- a `young` row's head cannot have (head_is_young). `h.text`: the head as a
-- page already read it (false: none), or nil to read it here.
local function shown_preview(h, last, ttl, young)
  local text = h.text
  if text == nil then text = redis.call('GET', h.head) end
  local head = decode_head(text)
  if head and not young and redis.call('TTL', h.head) < ttl / 2 then redis.call('EXPIRE', h.head, ttl) end
  return held_preview(h, head, last) or ''
end

-- A head lives `ttl` seconds past its last message: a row whose last
-- message (by its list score, `ts * 1000 + seq % 1000`) is younger than
-- half of that at `now_ms` needs no look at its head's time to live.
-- previews.rs tells a cluster's rows apart the same way (a unit test holds
-- the two together).
local function head_is_young(score, now_ms, ttl)
  return now_ms - math.floor(score / 1000) < ttl * 1000 / 2
end

-- Redis's clock in milliseconds, read once by a script.
local clock_ms
local function now_ms()
  if not clock_ms then
    local time = redis.call('TIME')
    clock_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  end
  return clock_ms
end

-- The base ends here: the scripts that only read heads once per hash slot
-- (previews; on Redis Cluster a call runs them many times) load only the
-- text above, which Redis runs anew on every call.
-- BASE END

-- States --------------------------------------------------------------------

local function new_state(category)
  return {last = 0, read = 0, mentions = 0, recalled = 0, flags = '', category = category or '', score = ''}
end

local function encode_state(st)
  return int(st.last) .. ':' .. int(st.read) .. ':' .. int(st.mentions) .. ':' .. int(st.recalled) .. ':'
    .. st.flags .. ':' .. st.category .. ':' .. st.score .. (st.legacy and ':' .. st.legacy or '')
end

-- A value not in this form (corrupted, or written by hand) reads as an empty
-- conversation: reconcile then rewrites it from the truth. A state an
-- earlier layout wrote ends with `:preview` (its last message's, from before
-- heads held them): kept as `legacy` until a newer message comes, so that
-- rows written before an upgrade keep their preview.
local function decode_state(value)
  local last, read, mentions, recalled, flags, category, score, rest =
    string.match(value, '^(%d+):(%d+):(%d+):(%d+):(%a*):([%w_%-]*):(%d*)(.*)$')
  if not last or (rest ~= '' and string.sub(rest, 1, 1) ~= ':') then return new_state() end
  local legacy
  if rest ~= '' then legacy = string.sub(rest, 2) end
  return {last = tonumber(last), read = tonumber(read), mentions = tonumber(mentions),
          recalled = tonumber(recalled), flags = flags, category = category, score = score, legacy = legacy}
end

local function has_flag(st, flag)
  return string.find(st.flags, flag, 1, true) ~= nil
end

-- Flags are kept in one order: one state has one text.
local function set_flag(st, flag, on)
  local flags = ''
  for _, f in ipairs({'k', 'm', 'p', 'u', 'x'}) do
    if (f == flag and on) or (f ~= flag and has_flag(st, f)) then flags = flags .. f end
  end
  st.flags = flags
end

-- What one listed conversation counts: its unread and mention numbers, and
-- what it adds to the badge sums (a muted one counts in `muted` only; a mark
-- without unread counts one). Mirrored by state.rs (a unit test runs both).
local NOTHING = {unread = 0, badge = 0, muted = 0, mentions = 0}

local function counted(st)
  local unread = math.max(st.last - st.read - st.recalled, 0)
  local muted = has_flag(st, 'm')
  local badge = unread
  if muted then badge = 0 elseif has_flag(st, 'u') and unread == 0 then badge = 1 end
  return {unread = unread, badge = badge, muted = muted and unread or 0, mentions = st.mentions}
end

local function differs(a, b)
  return a.unread ~= b.unread or a.badge ~= b.badge or a.muted ~= b.muted or a.mentions ~= b.mentions
end

-- Where a conversation is for a user: its state and 'conv' (listed) or
-- 'kept'; nil when the user has nothing of it.
local function find(u, conv)
  local value = redis.call('HGET', u.conv, conv)
  if value then return decode_state(value), 'conv' end
  value = redis.call('HGET', u.kept, conv)
  if value then return decode_state(value), 'kept' end
  return nil, nil
end

-- Marks ---------------------------------------------------------------------

local function mark(conv, kind, seq)
  return conv .. '\0' .. kind .. string.format('%016d', seq)
end

local function has_mark(u, conv, kind, seq)
  return redis.call('ZSCORE', u.marks, mark(conv, kind, seq)) ~= false
end

local function add_mark(u, conv, st, kind, seq)
  redis.call('ZADD', u.marks, 0, mark(conv, kind, seq))
  set_flag(st, 'k', true)
end

local function drop_marks(u, conv)
  redis.call('ZREMRANGEBYLEX', u.marks, '[' .. conv .. '\0', '(' .. conv .. '\1')
end

-- Message `seq` was recalled: unless the member had read it, it counts
-- neither as unread nor as a mention. Returns whether the state changed.
local function mark_recalled(u, conv, st, seq)
  if seq <= st.read or has_mark(u, conv, 'r', seq) then return false end
  redis.call('ZREM', u.marks, mark(conv, 'm', seq))
  add_mark(u, conv, st, 'r', seq)
  return true
end

-- Marks at or below the cursor can never count again and go; the counts are
-- those of the marks in (read, last]. O(log n) in the marks kept.
local function settle_marks(u, conv, st)
  if not has_flag(st, 'k') then
    st.mentions, st.recalled = 0, 0
    return
  end
  for _, kind in ipairs({'m', 'r'}) do
    redis.call('ZREMRANGEBYLEX', u.marks, '[' .. conv .. '\0' .. kind, '[' .. mark(conv, kind, st.read))
  end
  redis.call('ZREMRANGEBYLEX', u.marks, '[' .. conv .. '\0p', '(' .. conv .. '\0q')
  local function count(kind)
    if st.last <= st.read then return 0 end
    return redis.call('ZLEXCOUNT', u.marks, '(' .. mark(conv, kind, st.read), '[' .. mark(conv, kind, st.last))
  end
  st.mentions, st.recalled = count('m'), count('r')
  if redis.call('ZLEXCOUNT', u.marks, '[' .. conv .. '\0', '(' .. conv .. '\1') == 0 then set_flag(st, 'k', false) end
end

-- Versions, badges, events ----------------------------------------------------

-- Every change of a user's state bumps its version, so that a rebuild from
-- SQL can tell whether the state moved since it read the truth.
local function bump(u)
  return redis.call('HINCRBY', u.meta, 'v', 1)
end

local function version(u)
  return redis.call('HGET', u.meta, 'v') or '0'
end

-- With a SQL store, a user whose state was never loaded (new, or Redis lost
-- it) must be read from the truth; so must a conversation Redis does not
-- have for a user some of whose truth it could not keep (partial).
local function unloaded(u, require_loaded)
  return require_loaded == '1' and not redis.call('HGET', u.meta, 'loaded')
end

local function beyond_kept(u, require_loaded)
  return require_loaded == '1' and redis.call('HGET', u.meta, 'partial') ~= false
end

local function move(u, field, delta)
  if delta ~= 0 and redis.call('HINCRBY', u.badge, field, int(delta)) == 0 then redis.call('HDEL', u.badge, field) end
end

-- Moves the badge sums of a category from `before` to `now`.
local function move_badge(u, category, before, now)
  move(u, category, now.badge - before.badge)
  move(u, category .. ':m', now.muted - before.muted)
  move(u, category .. ':@', now.mentions - before.mentions)
end

-- Badge totals: sums of the fields of each kind.
local function badge_totals(u)
  local fields = redis.call('HGETALL', u.badge)
  local totals = {total = 0, muted = 0, mentions = 0}
  for i = 1, #fields, 2 do
    local n = math.max(tonumber(fields[i + 1]) or 0, 0)
    local kind = string.match(fields[i], ':(.)$')
    if kind == 'm' then totals.muted = totals.muted + n
    elseif kind == '@' then totals.mentions = totals.mentions + n
    else totals.total = totals.total + n end
  end
  return totals
end

-- Flat badge reply: the number of fields, then field, value pairs.
local function badge_reply(u, out)
  local fields = redis.call('HGETALL', u.badge)
  out[#out + 1] = #fields / 2
  for _, v in ipairs(fields) do out[#out + 1] = v end
  return out
end

-- An event's JSON object of `fields`, {name, value} pairs in order: texts
-- and nil as cjson writes them, numbers with int() (cjson writes 14
-- significant digits, and a seq or count may have 16), tables of such pairs
-- as objects.
local function event_json(fields)
  local parts = {}
  for i, field in ipairs(fields) do
    local name, value = field[1], field[2]
    local text
    if type(value) == 'number' then text = int(value)
    elseif type(value) == 'table' then text = event_json(value)
    elseif value == nil then text = 'null'
    else text = cjson.encode(value) end
    parts[i] = cjson.encode(name) .. ':' .. text
  end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- The change event for push gateways and the user's other devices, with the
-- numbers as they are after the whole step; after a whole-state rewrite
-- (no conversation) only the badge.
local function publish(channel, user, conv, now, u)
  local totals = badge_totals(u)
  local unread, mentions
  if conv then unread, mentions = now.unread, now.mentions end
  redis.call('PUBLISH', channel, event_json({{'user', user}, {'conversation', conv}, {'unread', unread},
    {'mentions', mentions},
    {'badge', {{'total', totals.total}, {'muted', totals.muted}, {'mentions', totals.mentions}}}}))
end

-- Saving ----------------------------------------------------------------------

-- Writes a listed conversation's new state and moves the badge by what it
-- counts now; returns what it counts.
local function save(u, conv, before, st)
  settle_marks(u, conv, st)
  st.score = ''
  redis.call('HSET', u.conv, conv, encode_state(st))
  local now = counted(st)
  move_badge(u, st.category, before, now)
  bump(u)
  return now
end

-- Drops kept states beyond max_kept, oldest first; what they held is gone, so
-- with a SQL store the user is partial from then on.
local function evict(u, max_kept)
  while redis.call('ZCARD', u.age) > max_kept do
    local oldest = redis.call('ZPOPMIN', u.age)[1]
    redis.call('HDEL', u.kept, oldest)
    drop_marks(u, oldest)
    redis.call('HSET', u.meta, 'partial', '1')
  end
end

-- Keeps a state that is not listed (with its score, if it has one).
local function keep(u, conv, st, max_kept)
  settle_marks(u, conv, st)
  redis.call('HSET', u.kept, conv, encode_state(st))
  redis.call('ZADD', u.age, bump(u), conv)
  evict(u, max_kept)
end

-- Takes a listed conversation out of the list and the badge; returns its
-- state, with its score, and what it counted.
local function unlist(u, conv)
  local st = decode_state(redis.call('HGET', u.conv, conv))
  local was = counted(st)
  move_badge(u, st.category, was, NOTHING)
  st.score = redis.call('ZSCORE', u.list, conv) or ''
  redis.call('ZREM', u.list, conv)
  redis.call('HDEL', u.conv, conv)
  redis.call('HDEL', u.pinned, conv)
  return st, was
end

-- A user with no listed conversation keeps its other keys (kept cursors,
-- marks, meta) for `ttl` seconds: the key space shrinks when users go, and
-- no call leaves keys behind for good for a user that holds nothing.
local function idle(u, ttl)
  if redis.call('ZCARD', u.list) == 0 then
    for _, key in ipairs({u.meta, u.kept, u.age, u.marks, u.groups}) do redis.call('EXPIRE', key, ttl) end
  end
end

-- Lists a conversation (new, or back from kept) at `score`; a user that had
-- none listed is no longer idle.
local function enlist(u, conv, st, score)
  if redis.call('ZCARD', u.list) == 0 then
    for _, key in ipairs({u.meta, u.kept, u.age, u.marks, u.groups}) do redis.call('PERSIST', key) end
  end
  redis.call('HDEL', u.kept, conv)
  redis.call('ZREM', u.age, conv)
  redis.call('ZADD', u.list, score, conv)
  if has_flag(st, 'p') then redis.call('HSET', u.pinned, conv, '1') end
end

-- A listed conversation's list score rises to `score` (its head's) if it is
-- lower: a message to a large conversation leaves the score of a member it
-- writes to the member's catch-up (`score_waits` in reach). Returns whether
-- it rose.
local function raise_score(u, conv, score)
  local held = tonumber(redis.call('ZSCORE', u.list, conv))
  score = tonumber(score)
  if not (held and score and held < score) then return false end
  redis.call('ZADD', u.list, int(score), conv)
  return true
end

-- The score of large conversation `conv`'s head, if this script knows it
-- (defined with the large conversations, below).
local head_score

-- The listed conversation that goes first when the list is full: the oldest
-- one not pinned (nil if none), and its score. A large conversation's score
-- that waits for the member's catch-up rises to its head's first, so that a
-- catch-up, which brings conversations back one by one, never takes one for
-- older than it is.
local function oldest_unpinned(u)
  while true do
    local rows = redis.call('ZRANGE', u.list, 0, redis.call('HLEN', u.pinned), 'WITHSCORES')
    local oldest, score
    for i = 1, #rows, 2 do
      if redis.call('HEXISTS', u.pinned, rows[i]) == 0 then
        oldest, score = rows[i], tonumber(rows[i + 1])
        break
      end
    end
    if not oldest or redis.call('HEXISTS', u.groups, oldest) == 0
      or not raise_score(u, oldest, head_score(oldest)) then
      return oldest, score
    end
  end
end

-- Keeps the newest max_conversations listed (pinned ones always stay); the
-- rest go to kept with their cursors. Returns whether the badge moved.
local function trim(u, max_conversations, max_kept)
  local moved = false
  while redis.call('ZCARD', u.list) > max_conversations do
    local oldest = oldest_unpinned(u)
    if not oldest then return moved end
    local st, was = unlist(u, oldest)
    if differs(was, NOTHING) then moved = true end
    keep(u, oldest, st, max_kept)
  end
  return moved
end

-- With a SQL store (a script's argument `require_loaded`, set by
-- take_logs), a user whose state Redis cannot complete (a member owed
-- entries a log dropped, a partial user whose list needs a state Redis
-- dropped) is rebuilt from the truth, which holds it; cache-only, the
-- user takes what Redis still has.
local rebuilds_from_truth = false

-- Set by a rebuild, which holds the user's truth: a state Redis dropped
-- for a partial user is not built by a catch-up (from a read cursor of 0)
-- but left to that truth; the user's `waits_for_truth` names it, with the
-- counter of its log then.
local truth_at_hand = false
local function rebuilding_from_truth() truth_at_hand = true end

-- Set by a rebuild while it compares a user with that truth: a state owed
-- entries a log dropped does not take the rest of the log either, but is
-- left to the truth (the user's reads would have gone to it), and
-- `owed_truth` says so. (After the rewrite the log comes back from its
-- start over the truth's state, dropped entries and all.)
local comparing_with_truth = false
local function comparing(on) comparing_with_truth = on end

-- After the list lost a conversation or a pin: the newest kept ones that
-- have a message come back while there is room, or while they are newer
-- than the oldest listed unpinned one, so that the list is always the
-- pinned conversations and then the newest. O(kept). Returns whether the
-- badge moved.
local function rebalance(u, max_conversations, max_kept)
  local moved = trim(u, max_conversations, max_kept)
  if rebuilds_from_truth and redis.call('HGET', u.meta, 'partial') then
    -- Redis dropped some of this user's states, maybe newer ones than any
    -- it kept: the truth says what comes into the list (the caller answers
    -- from it, and rebuilds the user).
    redis.call('HDEL', u.meta, 'loaded')
    return moved
  end
  local candidates, kept = {}, redis.call('HGETALL', u.kept)
  for i = 1, #kept, 2 do
    local st = decode_state(kept[i + 1])
    if st.score ~= '' and not has_flag(st, 'x') then
      candidates[#candidates + 1] = {conv = kept[i], st = st, score = tonumber(st.score)}
    end
  end
  table.sort(candidates, function(a, b)
    if a.score ~= b.score then return a.score > b.score end
    return a.conv > b.conv
  end)
  for _, candidate in ipairs(candidates) do
    if redis.call('ZCARD', u.list) >= max_conversations then
      local oldest, oldest_score = oldest_unpinned(u)
      local newer = oldest and (candidate.score > oldest_score
        or (candidate.score == oldest_score and candidate.conv > oldest))
      if not newer then break end
      local st, was = unlist(u, oldest)
      if differs(was, NOTHING) then moved = true end
      keep(u, oldest, st, max_kept)
    end
    local score = candidate.st.score
    enlist(u, candidate.conv, candidate.st, score)
    if differs(save(u, candidate.conv, NOTHING, candidate.st), NOTHING) then moved = true end
  end
  return moved
end

-- The user has seen everything up to seq (never more than `ahead` past the
-- last message known): the read cursor never moves back, what arrived after
-- seq stays unread, a mark-unread flag goes. A cursor that comes before the
-- conversation's first touch is kept for it. Returns the status ('ok':
-- listed, 'kept', 'early': no touch yet, 'gone': left or deleted), the read
-- cursor, what the conversation counts now, whether the badge moved, and
-- whether it took a mark-unread away.
local function read_up_to(u, conv, seq, ahead, max_kept)
  local st, where = find(u, conv)
  if st and has_flag(st, 'x') then return 'gone', 0, NOTHING, false, false end
  seq = math.min(seq, (st and st.last or 0) + ahead)
  if not st then
    st = new_state()
    st.read = seq
    keep(u, conv, st, max_kept)
    return 'early', seq, NOTHING, false, false
  end
  local status = where == 'conv' and 'ok' or 'kept'
  local before = counted(st)
  local unmarked = has_flag(st, 'u')
  if seq <= st.read and not unmarked then return status, st.read, before, false, false end
  st.read = math.max(st.read, seq)
  set_flag(st, 'u', false)
  if where == 'kept' then
    keep(u, conv, st, max_kept)
    return status, st.read, counted(st), false, unmarked
  end
  local now = save(u, conv, before, st)
  return status, st.read, now, differs(before, now), unmarked
end

-- A message reaches a member -------------------------------------------------

-- The member's state takes message `msg.seq` of `conv` (list score
-- `msg.score`, category `msg.category`): `msg.role` 's' sent it (it reads the
-- conversation for them; `msg.sender_marked`: their mark-unread after it,
-- as the truth holds it), 'm' mentioned by name, '' neither; `msg.mention_all`;
-- `msg.recalled` and `msg.all` are seqs recalled and mentioning everyone,
-- from a large conversation's log. With `msg.score_waits` a listed
-- conversation keeps its list score: the member's next catch-up raises it
-- to the head's (raise_score). Idempotent and order-free: an older
-- message never moves the conversation but still brings its mention if it
-- is unread; a left or deleted conversation stays gone. Returns whether the
-- state changed, whether its numbers moved, what it counts now, and whether
-- the sender's mark-unread changed.
local function reach(m, conv, st, where, msg, max_conversations, max_kept)
  if st and has_flag(st, 'x') then return false, false end
  local seq, category = msg.seq, msg.category
  local before = where == 'conv' and counted(st) or NOTHING
  st = st or new_state(category)
  local changed, newer = where == nil, seq > st.last
  local marked_moved = false
  if st.category ~= category then
    -- Another category only after the head vouched for this one (a state
    -- from before the head, on a cluster): the old category gives up what
    -- the state counted there.
    move_badge(m, st.category, before, NOTHING)
    before, st.category, changed = NOTHING, category, true
  end
  if newer then
    st.last = seq
    st.legacy = nil
    changed = true
  end
  if msg.role == 's' then
    -- Writing to a conversation reads it, and a message that moves the
    -- sender's cursor takes their mark-unread too; one sent again, or one
    -- the cursor had passed when they marked it, leaves the mark. With a
    -- SQL store the truth decided (`msg.sender_marked`), from its cursor,
    -- which may be ahead of this one (a touch sent again after its Redis
    -- step failed). A mark it holds is taken only with the message: once
    -- the cursor is past it, a read or a newer message may have taken the
    -- mark since the truth answered.
    local marked = msg.sender_marked
    if seq > st.read then
      st.read = seq
      changed = true
      if marked == nil then marked = false end
    elseif marked then
      marked = nil
    end
    if marked ~= nil and has_flag(st, 'u') ~= marked then
      set_flag(st, 'u', marked)
      changed, marked_moved = true, true
    end
  end
  for _, s in ipairs(msg.recalled or {}) do
    if mark_recalled(m, conv, st, s) then changed = true end
  end
  local mentions = msg.all or {}
  if msg.role == 'm' or (msg.mention_all and msg.role ~= 's') then mentions = {seq, unpack(mentions)} end
  for _, s in ipairs(mentions) do
    if s > st.read and not has_mark(m, conv, 'm', s) and not has_mark(m, conv, 'r', s) then
      add_mark(m, conv, st, 'm', s)
      changed = true
    end
  end
  if not changed then return false, false end
  if where == 'kept' and not newer then
    -- A late message of a conversation that is not listed leaves it there.
    keep(m, conv, st, max_kept)
    return true, false, nil, marked_moved
  end
  if where ~= 'conv' then
    enlist(m, conv, st, msg.score)
  elseif newer and not msg.score_waits then
    redis.call('ZADD', m.list, msg.score, conv)
  end
  local now = save(m, conv, before, st)
  -- Only a conversation newly listed can push another one out.
  local trimmed = where ~= 'conv' and trim(m, max_conversations, max_kept)
  return true, differs(before, now) or trimmed, now, marked_moved
end

-- Large conversations (read diffusion) ---------------------------------------

-- A large conversation's log keeps this many recalls and @all mentions. A
-- member whose state is further behind than that is owed entries the log
-- no longer has: `~` (TRIMMED), scored by the newest entry dropped, tells.
-- The counter is the member `#` (COUNTER), scored by its value.
local LOG_ENTRIES = 1024
local TRIMMED, COUNTER = '~', '#'

-- The log's counter: what moved it (messages and entries); nil when the
-- conversation is not large.
local function log_counter(group)
  -- ZSCORE of no member gives false: the counter is nil then, as said.
  local counter = redis.call('ZSCORE', group, COUNTER)
  if not counter then return nil end
  return tonumber(counter)
end

-- Every log's counter is also kept in its tenant's clocks (CLOCK_BUCKETS
-- hashes, conversation -> counter), so that a member's catch-up learns
-- which of its large conversations moved from a few reads and reads only
-- their logs. `clocks_prefix` (the argument `clocks`) begins their names,
-- as keys.rs names them (a unit test holds the two together); it is '' on
-- Redis Cluster, where the clocks live in other slots and the cluster
-- client reads and moves them.
local CLOCK_BUCKETS = 16
local clocks_prefix = ''
local clock_keys = {}
-- The clocks this script read or wrote: conversation -> its counter as
-- stored, or false (none). A script that catches up many members (a touch
-- names up to 500, who often share their large groups) reads each clock
-- once; set_clock and forget_clock, the only writers, keep it current.
local known_clocks = {}

-- Names the tenant's clocks for the rest of the script (`prefix`: the
-- argument `clocks`).
local function use_clocks(prefix)
  clocks_prefix = prefix or ''
  clock_keys, known_clocks = {}, {}
  for bucket = 0, CLOCK_BUCKETS - 1 do clock_keys[bucket] = clocks_prefix .. bucket .. '}' end
end

-- Whether this script keeps the clocks itself (one Redis); on Redis
-- Cluster the caller does, and publishes what waits for a clock.
local function keeps_clocks()
  return clocks_prefix ~= ''
end

-- Which of the tenant's clocks holds conversation `conv`'s counter: the
-- sum keys.rs takes byte by byte (hash * 31 + byte, modulo 65521). A
-- member's catch-up asks this once per large conversation, and the calls
-- of string.byte are most of its time, so it takes up to twelve bytes a
-- call, summed six at a time: with 31^6 every sum stays below 2^53, where a
-- double is exact (and the modulo commutes). A 36-byte id (a UUID) costs
-- about 60% of four bytes a call, the way it was; short ids the same.
local POWERS_OF_31 = {31, 961, 29791, 923521, 28629151, 887503681}
local function clock_bucket(conv)
  local hash, at, length, byte = 0, 1, #conv, string.byte
  local six = POWERS_OF_31[6]
  while at + 11 <= length do
    local a, b, c, d, e, f, g, h, i, j, k, l = byte(conv, at, at + 11)
    hash = (hash * six + ((((a * 31 + b) * 31 + c) * 31 + d) * 31 + e) * 31 + f) % 65521
    hash = (hash * six + ((((g * 31 + h) * 31 + i) * 31 + j) * 31 + k) * 31 + l) % 65521
    at = at + 12
  end
  if at + 5 <= length then
    local a, b, c, d, e, f = byte(conv, at, at + 5)
    hash = (hash * six + ((((a * 31 + b) * 31 + c) * 31 + d) * 31 + e) * 31 + f) % 65521
    at = at + 6
  end
  if at <= length then
    -- The last one to five bytes, nested: a nil ends them.
    local a, b, c, d, e = byte(conv, at, length)
    local part = a
    if b then
      part = part * 31 + b
      if c then
        part = part * 31 + c
        if d then
          part = part * 31 + d
          if e then part = part * 31 + e end
        end
      end
    end
    hash = (hash * POWERS_OF_31[length - at + 1] + part) % 65521
  end
  return hash % CLOCK_BUCKETS
end

-- The clock key that holds conversation `conv`'s counter.
local function clock_key(conv)
  return clock_keys[clock_bucket(conv)]
end

-- The log of `conv` moved to `counter` (on one Redis, in the same step, so
-- the clock never lags its log there).
local function set_clock(conv, counter)
  if not keeps_clocks() then return end
  known_clocks[conv] = int(counter)
  redis.call('HSET', clock_key(conv), conv, known_clocks[conv])
end

-- A deleted conversation leaves its clock.
local function forget_clock(conv)
  if not keeps_clocks() then return end
  known_clocks[conv] = false
  redis.call('HDEL', clock_key(conv), conv)
end

-- Makes the conversation large (its log starts empty); returns whether it
-- was not (its log is new). Its counter starts at Redis's time in
-- milliseconds (see move_counter).
local function make_large(conv, group)
  local start = now_ms()
  local made = redis.call('ZADD', group, 'NX', int(start), COUNTER) == 1
  if made then set_clock(conv, start) end
  return made
end

-- Moves the log's counter (`counter`: what it holds, if the caller just
-- read it) to one more, or to Redis's time in milliseconds if that is
-- later; returns it. A counter so never takes a value it held before, even
-- across a loss: a log made again after it was deleted or lost, or one that
-- lost its latest moves (a failover before they reached the replica),
-- moves above every membership record the lost moves left (unless it had
-- moved more than once a millisecond for as long as it lived). Such a
-- record is then behind, and its member catches up with every message and
-- entry since; a counter that started over met the record's value and
-- took the new log for one the member had seen. (A log of an earlier
-- build counts up from 0: its next move here takes it to the time.)
local function move_counter(group, counter)
  counter = math.max((counter or log_counter(group)) + 1, now_ms())
  redis.call('ZADD', group, int(counter), COUNTER)
  return counter
end

-- Who joined a conversation that is not large yet is kept for a while in
-- its `joined` zset (by the time they joined, the newest JOINERS_KEPT): the
-- app may have built the message that makes it large before they joined,
-- and that message, not naming them, would leave them out of its log.
-- Every message of the large conversation hands them to the caller
-- (recorded_joiners), which makes each who still has the conversation a
-- member of the log and then forgets them (forget_joiners.lua): a touch
-- answered 503 in between hands them over again when the app retries it.
-- A joiner who leaves is forgotten by the leave, before its state goes.
local JOINERS_KEPT, JOINERS_SECONDS = 1000, 3600

-- Records `users` as joining conversation `K` (its `group` and `joined`
-- keys), unless it is large already.
local function record_joiners(K, users)
  if #users == 0 or log_counter(K.group) then return end
  local now = math.floor(now_ms() / 1000)
  for _, user in ipairs(users) do redis.call('ZADD', K.joined, now, user) end
  redis.call('ZREMRANGEBYSCORE', K.joined, '-inf', '(' .. int(now - JOINERS_SECONDS))
  redis.call('ZREMRANGEBYRANK', K.joined, 0, -(JOINERS_KEPT + 1))
  redis.call('EXPIRE', K.joined, JOINERS_SECONDS)
end

-- The users recorded as joining conversation `K` lately (record_joiners)
-- and not yet forgotten by the caller that made them members of its log.
local function recorded_joiners(K)
  return redis.call('ZRANGE', K.joined, 0, -1)
end

-- Drops the log's oldest entry past LOG_ENTRIES, and scores TRIMMED by it.
-- The counter (`#`) scores above every entry, TRIMMED below them all.
local function trim_log(group)
  local count = redis.call('ZCARD', group)
  if count <= LOG_ENTRIES + 1 then return end
  local lowest = redis.call('ZRANGE', group, 0, 1, 'WITHSCORES')
  local at = 1
  if lowest[1] == TRIMMED then
    if count <= LOG_ENTRIES + 2 then return end
    at = 3
  end
  redis.call('ZREM', group, lowest[at])
  redis.call('ZADD', group, lowest[at + 1], TRIMMED)
end

-- Logs a recall ('r') or an @all mention ('a') of message `seq`, once;
-- returns the log's counter after it, or false if it was logged already.
-- `counter`: the log's counter, if the caller just read it.
local function log_entry(conv, group, kind, seq, counter)
  local entry = kind .. int(seq)
  if redis.call('ZSCORE', group, entry) then return false end
  counter = move_counter(group, counter)
  redis.call('ZADD', group, int(counter), entry)
  set_clock(conv, counter)
  trim_log(group)
  return counter
end

-- A message moved the head: members have something to catch up with.
-- Returns the log's counter after it (`counter`: as log_entry).
local function log_message(conv, group, counter)
  counter = move_counter(group, counter)
  set_clock(conv, counter)
  return counter
end

-- The event of a large conversation's message, once for all its members
-- (who get no event each, but the sender and those mentioned by name).
local function publish_conversation(channel, conv, seq)
  redis.call('PUBLISH', channel, event_json({{'user', nil}, {'conversation', conv}, {'seq', seq}, {'large', true}}))
end

-- How the head key of every conversation of the call's tenant begins (the
-- argument `conversations`, given to take_logs): a membership record holds
-- only a number, and the keys of its conversation are named from this.
local conversations_prefix

-- A conversation's head, log and earlier-messages keys, named as keys.rs
-- names them (a unit test holds the two together): the prefix, the escaped
-- identifier, `}`.
local NEEDS_ESCAPE = '[^A-Za-z0-9%._%-@|%+#=/]'
local function escape_byte(c)
  return string.format('%%%02X', string.byte(c))
end
local function conversation_keys(conv)
  -- Most ids need no escape, and looking costs less than rewriting.
  local escaped = conv
  if string.find(conv, NEEDS_ESCAPE) then escaped = string.gsub(conv, NEEDS_ESCAPE, escape_byte) end
  local head = conversations_prefix .. escaped .. '}'
  return head, head .. ':group', head .. ':earlier'
end

-- Flat conversation row: id, category, last, read, score, unread, mentions,
-- flags, and its preview. On one Redis the preview is read here, from the
-- conversation's head, in the same step as the row (a head read renews
-- itself, `head_ttl`); on Redis Cluster the head lives in another slot and
-- the caller reads it (previews.lua), so the row carries only what an
-- earlier layout kept in the state. That preview shows when the head holds
-- none for the row ('' if neither). `h`: the conversation's keys and, in
-- `text`, its head as a page read it with the others (page_heads); nil to
-- read them here.
local function conversation_row(out, u, conv, st, score, head_ttl, h)
  local now = counted(st)
  local preview = ''
  if keeps_clocks() then
    if not h then
      local head, _, earlier = conversation_keys(conv)
      h = {head = head, earlier = earlier}
    end
    local ttl, listed = tonumber(head_ttl), tonumber(score)
    local young = listed ~= nil and head_is_young(listed, now_ms(), ttl)
    preview = shown_preview(h, st.last, ttl, young)
  end
  if preview == '' then preview = st.legacy or '' end
  for _, v in ipairs({conv, st.category, int(st.last), int(st.read), score, now.unread, now.mentions, st.flags,
                      preview}) do
    out[#out + 1] = v
  end
  return out
end

-- The heads of a page's conversations (`convs`) on one Redis, read at once:
-- for each, its keys and its head's `text` (false: none), as
-- conversation_row takes them. Empty on Redis Cluster, where the caller
-- reads the previews.
local function page_heads(convs)
  local out = {}
  if not keeps_clocks() or #convs == 0 then return out end
  local keys = {}
  for i, conv in ipairs(convs) do
    local head, _, earlier = conversation_keys(conv)
    out[i], keys[i] = {head = head, earlier = earlier}, head
  end
  for i, text in ipairs(redis.call('MGET', unpack(keys))) do out[i].text = text end
  return out
end

-- Records that the member's state of large conversation `conv` has caught up
-- with its log up to `applied`.
local function join_large(u, conv, applied)
  redis.call('HSET', u.groups, conv, int(applied))
end

-- A membership record of conversation `conv`: how far the member caught up,
-- and the keys of the conversation's head and log. (A record of an earlier
-- layout, `applied NL head key NL log key`, still reads.)
local function decode_membership(conv, value)
  local applied = tonumber(value)
  if applied then
    local head_key, group_key = conversation_keys(conv)
    return applied, head_key, group_key
  end
  local head_key, group_key
  applied, head_key, group_key = string.match(value, '^(%d+)\n([^\n]*)\n([^\n]*)$')
  if not applied then return nil end
  return tonumber(applied), head_key, group_key
end

-- How far a membership record says the member caught up (nil: not a record).
local function membership_applied(value)
  return tonumber(value) or tonumber(string.match(value, '^(%d+)\n'))
end

-- What a member of a large conversation catches up with: the log's counter
-- (nil: the conversation is no longer large), and, if it is not `applied`,
-- the head's last message and the log's entries after `applied` ({entry,
-- counter} pairs, oldest first).
local function read_log(head_key, group_key, applied)
  local log = {counter = log_counter(group_key), entries = {}}
  if not log.counter or log.counter == applied then return log end
  log.head = get_head(head_key)
  local found = redis.call('ZRANGEBYSCORE', group_key, '(' .. int(applied), int(log.counter), 'WITHSCORES')
  for i = 1, #found, 2 do log.entries[#log.entries + 1] = {found[i], tonumber(found[i + 1])} end
  return log
end

-- A log as one line of text, `conversation TAB counter TAB entries TAB head`
-- (entries `entry=counter` apart by spaces; the head without its preview),
-- which `take_logs` reads back. Identifiers hold no control characters.
local function encode_log(conv, log)
  local entries = {}
  for i, e in ipairs(log.entries) do entries[i] = e[1] .. '=' .. int(e[2]) end
  local head = ''
  if log.head then head = encode_head(log.head.seq, log.head.score, log.head.category, '') end
  return conv .. '\t' .. (log.counter and int(log.counter) or '') .. '\t' .. table.concat(entries, ' ')
    .. '\t' .. head
end

-- The conversation and log of a line encode_log wrote (nil: not one).
local function decode_log(line)
  local conv, counter, entries, head = string.match(line, '^([^\t]*)\t(%d*)\t([^\t]*)\t(.*)$')
  if not conv then return nil end
  local log = {counter = tonumber(counter), head = decode_head(head), entries = {}}
  for entry, at in string.gmatch(entries, '([^ =]+)=(%d+)') do
    log.entries[#log.entries + 1] = {entry, tonumber(at)}
  end
  return conv, log
end

-- On Redis Cluster a script cannot read the heads and logs of its users'
-- large conversations (other slots): the caller reads them first
-- (group_logs.lua) and passes them in the argument `logs`. Nil on one
-- Redis, where the scripts read them where they are; else by conversation.
local given_logs

-- The first element of a reply that asks for the logs instead of answering.
local LOGS_WANTED = 'unread:logs-wanted'

-- Every script that catches users up calls this before anything else, with
-- its `logs` argument: '' on one Redis; on Redis Cluster '-' (none given
-- yet) or the logs, as encode_log writes them, one per line. With '-' and
-- users in large conversations, the script must write nothing and answer
-- what this returns: LOGS_WANTED, n, then n times the conversation and how
-- far the users caught up (the least; with `from_start`, 0: the whole log),
-- as a text whose leading number says it; the caller names its keys, and
-- runs the script again with those logs (only those whose clock moved: a
-- log not given has nothing new). One user's membership records go back
-- as stored (membership_applied reads their leading number): a member of
-- many large conversations asks this on every call, and reading each
-- record here cost Redis more than the rest of the answer. Otherwise nil:
-- go on.
local function take_logs(A, users, from_start)
  local text = A.logs
  rebuilds_from_truth = A.require_loaded == '1'
  conversations_prefix = A.conversations
  use_clocks(A.clocks)
  if text == '' then return nil end
  given_logs = {}
  if text ~= '-' then
    for line in string.gmatch(text, '[^\n]+') do
      local conv, log = decode_log(line)
      if conv then given_logs[conv] = log end
    end
    return nil
  end
  if #users == 1 and not from_start then
    local records = redis.call('HGETALL', users[1].groups)
    if #records == 0 then return nil end
    table.insert(records, 1, #records / 2)
    table.insert(records, 1, LOGS_WANTED)
    return records
  end
  -- out: LOGS_WANTED, n, then conversation, applied pairs; at[conv]: where
  -- its applied is in out.
  local out, at = {LOGS_WANTED, 0}, {}
  for _, u in ipairs(users) do
    local groups = redis.call('HGETALL', u.groups)
    for i = 2, #groups, 2 do
      local conv, applied = groups[i - 1], membership_applied(groups[i])
      if applied and from_start then applied = 0 end
      local where = at[conv]
      if applied and not where then
        out[#out + 1] = conv
        out[#out + 1] = applied
        at[conv] = #out
      elseif applied and applied < out[where] then
        out[where] = applied
      end
    end
  end
  if #out == 2 then return nil end
  out[2] = (#out - 2) / 2
  for i = 4, #out, 2 do out[i] = int(out[i]) end
  return out
end

-- One user's badge on Redis Cluster: its first run answers the logs it
-- wants (`wanted`, from take_logs) and after them `out`, what it answers if
-- none of those logs moved past where the user caught up. The caller takes
-- that once the clocks say so, and runs the script no second time. (A list
-- page does not: a page read in vain whenever a log moved costs more.)
local function with_standing(wanted, out)
  for _, v in ipairs(out) do wanted[#wanted + 1] = v end
  return wanted
end

-- What a member of large conversation `conv` (membership record `value`)
-- has to catch up with: how far it had, and the log (read here on one
-- Redis, given on a cluster); nil when the record is not one, or no log
-- was given (a conversation joined after the caller read the logs catches
-- up next time).
local function behind(conv, value)
  if given_logs then
    -- Most of a member's large conversations did not move: only the given
    -- logs cost more than a look-up.
    local log = given_logs[conv]
    local applied = log and membership_applied(value)
    if not applied then return nil end
    return {applied = applied, log = log}
  end
  local applied, head_key, group_key = decode_membership(conv, value)
  if not applied then return nil end
  return {applied = applied, log = read_log(head_key, group_key, applied)}
end

-- The score of large conversation `conv`'s head: read here on one Redis,
-- from its given log on a cluster (nil if none was given: then it did not
-- move since the caller read the logs).
function head_score(conv)
  local head
  if given_logs then
    head = given_logs[conv] and given_logs[conv].head
  else
    head = get_head((conversation_keys(conv)))
  end
  return head and head.score
end

-- Adds to `msg` the recalls and @all mentions the log holds after `applied`.
local function add_logged(msg, log, applied)
  for _, e in ipairs(log.entries) do
    local kind, seq = string.match(e[1], '^([ra])(%d+)$')
    if e[2] <= applied or e[2] > log.counter then kind = nil end
    if kind == 'r' then msg.recalled[#msg.recalled + 1] = tonumber(seq)
    elseif kind == 'a' then msg.all[#msg.all + 1] = tonumber(seq) end
  end
end

-- Whether nothing but messages moved the log after `applied`: no recall,
-- @all mention or dropped entry, only the counter.
local function only_messages(log, applied)
  for _, e in ipairs(log.entries) do
    if e[1] ~= COUNTER and e[2] > applied then return false end
  end
  return true
end

-- Whether a member caught up to `applied` is owed an entry the log dropped.
local function owes_dropped(log, applied)
  for _, e in ipairs(log.entries) do
    if e[1] == TRIMMED and e[2] > applied then return true end
  end
  return false
end

-- Whether the member, caught up to `applied`, is owed an entry the log
-- dropped and is rebuilt from the truth for it (with a SQL store): then
-- the member is unloaded (the caller's check of `unloaded` after the
-- catch-up answers a miss or names them) and takes nothing from the log.
local function owed_from_truth(u, log, applied)
  if not (rebuilds_from_truth and owes_dropped(log, applied)) then return false end
  redis.call('HDEL', u.meta, 'loaded')
  return true
end

-- Brings the member's state of one large conversation up to its head and
-- log, with the step every message takes (`reach`). Returns whether it
-- changed, and whether the member is owed entries the log dropped (then
-- unloaded, to be rebuilt from the truth).
local function catch_up_one(u, conv, value, max_conversations, max_kept)
  local b = behind(conv, value)
  if not b then return false end
  local applied, log = b.applied, b.log
  -- Nothing came since: one read per large conversation. (A counter behind
  -- `applied`, from logs read before another call caught the member up,
  -- applies again what the state holds: a step that changes nothing.)
  if log.counter == applied then return false end
  local st, where = find(u, conv)
  if not log.counter or (st and has_flag(st, 'x')) then
    -- No longer large (deleted), or the member left.
    redis.call('HDEL', u.groups, conv)
    return false
  end
  local head = log.head
  -- A state evicted from kept comes back as a message brings it back.
  if not st and not head then return false end
  if owed_from_truth(u, log, applied) then return false, true end
  local owed = comparing_with_truth and owes_dropped(log, applied)
  if owed or (not st and truth_at_hand and redis.call('HGET', u.meta, 'partial')) then
    u.waits_for_truth = u.waits_for_truth or {}
    u.waits_for_truth[conv] = log.counter
    u.owed_truth = u.owed_truth or owed
    return false
  end
  if not st and rebuilds_from_truth and redis.call('HGET', u.meta, 'partial') then
    -- Redis dropped some of this user's states: this one may have been
    -- among them, with a cursor only the truth knows. Coming into the list,
    -- the truth answers (and rebuilds the user); below it, the state stays
    -- where the truth keeps it, and the record moves past what came.
    local oldest, oldest_score = oldest_unpinned(u)
    local score = tonumber(head.score)
    if redis.call('ZCARD', u.list) < max_conversations or (oldest and (score > oldest_score
      or (score == oldest_score and conv > oldest))) then
      redis.call('HDEL', u.meta, 'loaded')
      return false, true
    end
    join_large(u, conv, log.counter)
    return false
  end
  local msg = {role = '', recalled = {}, all = {}}
  if head then
    msg.seq, msg.score, msg.category = head.seq, head.score, head.category
  else
    msg.seq, msg.score, msg.category = st.last, st.score, st.category
  end
  add_logged(msg, log, applied)
  local changed = reach(u, conv, st, where, msg, max_conversations, max_kept)
  if head then raise_score(u, conv, head.score) end
  join_large(u, conv, log.counter)
  return changed
end

-- Whether a large conversation whose clock holds `clock` (false: none)
-- moved past membership record `value`. The same text is the same counter
-- (both written by int()).
local function clock_moved(clock, value)
  return not clock or (clock ~= value and tonumber(clock) ~= membership_applied(value))
end

-- Which of a user's large conversations (`groups`, the HGETALL of its
-- membership records) moved past where the member caught up, or have a
-- clock that holds nothing: the index in `groups` of each, true. Nil on
-- Redis Cluster, where the caller gave only the logs that moved, and for a
-- user in none (every touch asks for each member). Every call of a member
-- of many large conversations runs this over all of them, so it reads each
-- clock key once (HMGET) with the names of its conversations in one pass
-- (only those no member before read in this script), and compares the
-- counters as the texts they are stored as.
local function moved_groups(groups)
  if not keeps_clocks() or #groups == 0 then return nil end
  local moved, names, at = {}, {}, {}
  for i = 1, #groups, 2 do
    local conv = groups[i]
    local known = known_clocks[conv]
    if known ~= nil then
      if clock_moved(known, groups[i + 1]) then moved[i] = true end
    else
      local bucket = clock_bucket(conv)
      local these = names[bucket]
      if not these then
        these = {}
        names[bucket], at[bucket] = these, {}
      end
      these[#these + 1] = conv
      at[bucket][#these] = i
    end
  end
  for bucket, these in pairs(names) do
    local clocks = redis.call('HMGET', clock_keys[bucket], unpack(these))
    for j, i in ipairs(at[bucket]) do
      known_clocks[these[j]] = clocks[j]
      if clock_moved(clocks[j], groups[i + 1]) then moved[i] = true end
    end
  end
  return moved
end

-- On Redis Cluster, the membership records of user `u` in the large
-- conversations whose logs the call was given (only those that moved), as
-- HGETALL gives records: conversation, record; in one order (sorted). A
-- member of many large conversations reads only these, not every record.
local function given_records(u)
  local convs = {}
  for conv in pairs(given_logs) do convs[#convs + 1] = conv end
  table.sort(convs)
  local out = {}
  for first = 1, #convs, 500 do
    local batch = {unpack(convs, first, math.min(first + 499, #convs))}
    for i, record in ipairs(redis.call('HMGET', u.groups, unpack(batch))) do
      if record then
        out[#out + 1] = batch[i]
        out[#out + 1] = record
      end
    end
  end
  return out
end

-- A large conversation's messages are written once, to its head and log;
-- each member's state catches up when the member's keys are next used, by
-- any call that reads or publishes them: then every number, badge and event
-- is what writing every member would have made it. On one Redis the heads
-- and logs are read here (other slots); on Redis Cluster they come with the
-- call (take_logs). `except`: a conversation the caller catches up itself.
-- Returns whether any state changed. A user found owed entries a log
-- dropped is rebuilt from the truth, so the rest waits for that.
local function catch_up(u, max_conversations, max_kept, except)
  local changed = false
  local groups
  if given_logs then groups = given_records(u) else groups = redis.call('HGETALL', u.groups) end
  -- A conversation whose clock says nothing came since costs no more.
  local stale = moved_groups(groups)
  for i = 1, #groups, 2 do
    local conv, value = groups[i], groups[i + 1]
    if conv ~= except and (not stale or stale[i]) then
      local moved, owed = catch_up_one(u, conv, value, tonumber(max_conversations), tonumber(max_kept))
      changed = changed or moved
      if owed then break end
    end
  end
  return changed
end

-- Catches up a user whose call answers a miss (with a SQL store) for a user
-- Redis cannot answer for: false if unloaded before the catch-up or after it
-- (a log dropped entries the user was owed: the truth answers).
local function caught_up(u, A)
  if unloaded(u, A.require_loaded) then return false end
  catch_up(u, A.max_conversations, A.max_kept)
  return not unloaded(u, A.require_loaded)
end
