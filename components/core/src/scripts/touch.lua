-- A message was stored: the conversation's head takes its preview (once,
-- for every member) and every member's state moves, in one atomic step (in
-- a large conversation, below, when each member next uses unread). Role:
-- 's' the sender (the message reads the conversation for them), 'm'
-- mentioned, '' neither. Idempotent and order-free: an older message that
-- arrives late never moves the conversation nor its preview, but still
-- brings its mention if it is unread; a left or deleted conversation stays
-- gone. With a SQL store, members Redis cannot answer for (unloaded, or a
-- conversation beyond what was kept) are not written but named in the
-- reply: the caller rebuilds them from the truth, which holds this message.
-- On Redis Cluster the head and each slot's members are separate parts,
-- which cannot refuse together, so a touch goes in rounds (`mode`):
-- 'head' first: the head, with the members its node serves, in one call.
--   It refuses a message of another category than the head's, and
--   otherwise takes it; with no category to vouch for, it writes nothing
--   and answers 'unvouched'. Its members in large conversations are left
--   to the next round (deferred), as is every member of a part without the
--   head (a slot that moved splits the call).
-- 'members' then: every other member part, without the head. A
--   conversation lives in its head's category, so no member's is checked
--   once the head vouched; `large` says what the head round answered of
--   the conversation's log, and `late` (the log from its start, as
--   encode_log writes it; '' if the message is not older than the head)
--   what a member new to the log is owed (see newer_than_this).
-- Unvouched: a round of 'check' looks for a conflict in every part, then
-- 'first' takes the message in the head alone, and then 'members'.
-- Standalone Redis runs the whole touch in one step ('all'). `named`: how
-- many members the whole touch names (a part carries some of them).
-- With a SQL store, `large_in_truth`: the truth has the conversation large
-- (it records that first), and a Redis that lost its log makes it large
-- again; `category_in_truth`: the truth has the conversation in the
-- message's category, so a head or state Redis holds in another (the app
-- moved the conversation) takes the message's instead of refusing it;
-- `sender_marked` ('1' or '0'): whether the truth holds the sender's
-- mark-unread after the message, which their state takes.
-- Reply: {'ok', applied (0/1), large (the log's counter after the message,
-- '' if the conversation is not large; from the head), fresh (1: its log
-- was made by this message), logged (1: the message moved the log, or a
-- rebuild moved it before and left it to this touch to announce, so the
-- conversation's event goes out; from the head), noted (1: on Redis
-- Cluster, by the rebuild's note, which the caller forgets once the event
-- is out), the head's seq ('' in a members part: on Redis Cluster an
-- event for a clock that was behind its log is the head's message, the one
-- that left it behind), sender_mark_moved (1: with a SQL store, the
-- sender's mark-unread changed here to `sender_marked`; the caller reads it
-- back, as a call at once may have moved the truth's since), n, n
-- unanswerable users,
-- j, j users who joined lately (record_joiners: every message of the large
-- conversation hands them to the caller until it forgets them), d, d users
-- a 'head' call left to the members' round}, {'unvouched'} or {'conflict',
-- user ('' for the head), category}.
local K, A, members = declare {
  keys = CONVERSATION_KEYS,
  args = {'conversation', 'seq', 'score', 'category', 'preview', 'mention_all', 'max_conversations', 'max_kept',
          'require_loaded', 'channel', 'head_ttl', 'mode', 'large_threshold', 'named', 'large_in_truth',
          'category_in_truth', 'sender_marked', 'large', 'late', 'logs', 'conversations', 'clocks'},
  each = {keys = USER_KEYS, args = {'user', 'role'}},
}
local conv, category, mode = A.conversation, A.category, A.mode
local seq, score = tonumber(A.seq), A.score
local max_conversations, max_kept = tonumber(A.max_conversations), tonumber(A.max_kept)

-- The category the head holds ('' if none, or no head).
local function head_category()
  local head = get_head(K.head)
  return head and head.category or ''
end

-- The 'ok' reply (see above); `deferred`: the members a 'head' call left
-- to the members' round, unwritten.
local head_seq -- the head's seq once the message went to it
local sender_mark_moved = false -- the sender's mark-unread changed
local function answer(applied, counter, fresh, logged, noted, unanswered, joiners, deferred)
  if not head_seq then
    local head = K and get_head(K.head)
    head_seq = head and head.seq
  end
  local out = {'ok', applied, counter and int(counter) or '', fresh and 1 or 0, logged and 1 or 0,
               noted and 1 or 0, head_seq and int(head_seq) or '', sender_mark_moved and 1 or 0}
  for _, users in ipairs({unanswered, joiners, deferred}) do
    out[#out + 1] = #users
    for _, user in ipairs(users) do out[#out + 1] = user end
  end
  return out
end

-- The truth's category: the head takes it (a message's states take theirs
-- as it reaches them), and no member's is checked against it.
local recategorized = A.category_in_truth == '1'
if K and recategorized then
  local head = get_head(K.head)
  if head and head.category ~= category then
    redis.call('SET', K.head, encode_head(head.seq, head.score, category, head.preview), 'KEEPTTL')
  end
end

local deferred = {}
if mode == 'head' then
  -- The head vouches first: a refused or unvouched message reads no member.
  if K then
    local held = head_category()
    if held == '' then return {'unvouched'} end
    if held ~= category then return {'conflict', '', held} end
  end
  -- A member who catches up with large conversations waits for the
  -- members' round, where the logs they need are read once for all (here
  -- they would be read before, in a round of their own); every member of
  -- a part without the head waits.
  local plain = {}
  for _, m in ipairs(members) do
    if not K or redis.call('EXISTS', m.groups) == 1 then deferred[#deferred + 1] = m.user else plain[#plain + 1] = m end
  end
  if not K then return answer(0, nil, false, false, false, {}, {}, deferred) end
  members = plain
end

-- A conversation lives in one category: refuse a change before writing
-- (once the head vouched, it answers for its members). What each member has
-- of it is read once, here.
local found = {}
local vouched = mode == 'members' or mode == 'head' or recategorized
for i, m in ipairs(members) do
  local st, where = find(m, conv)
  if not vouched and st and st.category ~= '' and st.category ~= category and not has_flag(st, 'x') then
    return {'conflict', m.user, st.category}
  end
  found[i] = {st = st, where = where}
end
if mode == 'check' then return answer(0, nil, false, false, false, {}, {}, {}) end
local wanted = take_logs(A, members)
if wanted then return wanted end

-- A large conversation (read diffusion: above large_threshold members
-- named at once, then for good) takes the message in its head and log only;
-- of its members, those it names that catch up on use already are not
-- written unless they sent it or are mentioned by name. The others it names
-- are written, and catch up on use from then on. A members part has no head
-- and learns of the log from the head's round (`large`).
local group = K and K.group
local counter
if group then counter = log_counter(group) elseif A.large ~= '' then counter = tonumber(A.large) end
local threshold = tonumber(A.large_threshold)
local converts = group and not counter
  and ((threshold > 0 and tonumber(A.named) > threshold) or A.large_in_truth == '1')
if group and (counter or converts) then
  local held = head_category()
  if held ~= '' and held ~= category then return {'conflict', '', held} end
end
local fresh, joiners = false, {}
if converts then
  fresh = make_large(conv, group)
  counter = log_counter(group)
end
if group and counter then joiners = recorded_joiners(K) end
-- On Redis Cluster a list reads its rows and their previews apart: the head
-- keeps its earlier messages for a list caught between the two.
local advanced = false
if K then advanced, head_seq = advance_head(K, seq, A.score, category, A.preview, A.head_ttl, not keeps_clocks()) end
-- A rebuild that brought this message from the truth before it came left
-- it to this touch to announce (note_unannounced).
local due = group and counter and not advanced and head_seq == seq and unannounced(K, seq, keeps_clocks())
if group and counter then
  local moved = A.mention_all == '1' and log_entry(conv, group, 'a', seq, counter)
  if moved then
    advanced = true
  elseif advanced then
    moved = log_message(conv, group, counter)
  end
  counter = moved or counter
end

local msg = {seq = seq, score = score, category = category, mention_all = A.mention_all == '1'}
if A.sender_marked ~= '' then msg.sender_marked = A.sender_marked == '1' end
local applied, unanswered = 0, {}

-- The log, read from its start, if this message is older than the head
-- (late, or sent again after a 503); false otherwise. A members part on
-- Redis Cluster has no head: there the head's round found the message
-- late, and the caller read the log for it (`late`). Read once for every
-- member, after the message went to the head (`head_seq`): nothing below
-- moves the head or the log.
local late_log
local function log_if_late()
  if late_log == nil then
    local log
    if K then
      log = head_seq and head_seq > seq and read_log(K.head, K.group, 0)
    elseif A.late ~= '' then
      local _
      _, log = decode_log(A.late)
      -- Read after the head's round: what moved the log since is the
      -- member's next catch-up, from the counter its record starts at.
      if log and log.counter then log.counter = math.min(log.counter, counter) end
    end
    late_log = (log and log.head and log.head.seq > seq) and log or false
  end
  return late_log
end

-- A member new to the log whose message is late takes the head, the @all
-- mentions of newer messages and the recalls the log holds, as it would
-- have had the messages come in order; its record then starts at the
-- counter. Returns whether that moved its numbers, and what it counts now.
local function newer_than_this(m, conv, max_conversations, max_kept)
  local log = log_if_late()
  if not log then return false end
  local late = {seq = log.head.seq, score = log.head.score, category = log.head.category, role = '', recalled = {},
                all = {}}
  add_logged(late, log, 0)
  local newer = {}
  for _, s in ipairs(late.all) do
    if s > seq then newer[#newer + 1] = s end
  end
  late.all = newer
  local st, where = find(m, conv)
  local _, moved, now = reach(m, conv, st, where, late, max_conversations, max_kept)
  return moved, now
end

-- With a SQL store, a member new to the log whose message is late is owed
-- what came after it, and a log that dropped entries may have dropped
-- some of those (@all mentions of newer messages, recalls): the member is
-- rebuilt from the truth, which holds them, as a member behind a trimmed
-- log is (`owed_from_truth`). Returns whether it is.
local function late_and_owed(m)
  local log = rebuilds_from_truth and log_if_late()
  if not (log and owes_dropped(log, 0)) then return false end
  redis.call('HDEL', m.meta, 'loaded')
  return true
end

-- Writes the message to member `m` (`st`, `where`: what it has of the
-- conversation; `large`: its membership record, if any). The member's other
-- large conversations catch up first, so that the event below carries the
-- whole badge. What this one's log holds since the member's state comes
-- with the message, in one step; but a message older than the head (late),
-- or a member who left, catches up first as any call would. Returns false,
-- writing nothing of the message, for a member to rebuild from the truth
-- (a log dropped entries it was owed).
local function write_member(m, st, where, large)
  if catch_up(m, max_conversations, max_kept, large and conv) then st, where = find(m, conv) end
  local b = large and behind(conv, large)
  if b and b.log.counter == b.applied then b = nil end
  if b and (not b.log.counter or (b.log.head and b.log.head.seq > seq) or (st and has_flag(st, 'x'))) then
    if catch_up_one(m, conv, large, max_conversations, max_kept) then st, where = find(m, conv) end
    b = nil
  end
  local new_to_log = counter and not large and not (st and has_flag(st, 'x'))
  local owed = (b and owed_from_truth(m, b.log, b.applied)) or (new_to_log and late_and_owed(m))
  if owed or unloaded(m, A.require_loaded) then return false end
  -- The member (the sender, or mentioned by name) keeps its record if only
  -- messages moved the log since (the head alone carries them): its next
  -- call catches up with what came by then, as it would after any later
  -- message, and raises its list score to the head's then (the record says
  -- it is behind), so a message writes neither.
  local waits = b and only_messages(b.log, b.applied)
  msg.role, msg.recalled, msg.all, msg.score_waits = m.role, {}, {}, waits
  if b then add_logged(msg, b.log, b.applied) end
  local changed, moved, now, mark_moved = reach(m, conv, st, where, msg, max_conversations, max_kept)
  if changed then applied = 1 end
  if mark_moved and msg.sender_marked ~= nil then sender_mark_moved = true end
  if b then
    if not waits then
      -- The record moves on: a score an earlier message left waits no more.
      if b.log.head then raise_score(m, conv, b.log.head.score) end
      join_large(m, conv, b.log.counter)
    end
  elseif new_to_log then
    local late_moved, late_now = newer_than_this(m, conv, max_conversations, max_kept)
    if late_moved then applied, moved, now = 1, true, late_now end
    join_large(m, conv, counter)
  end
  if moved then publish(A.channel, m.user, conv, now or NOTHING, m) end
  return true
end

for i, m in ipairs(members) do
  local st, where = found[i].st, found[i].where
  local large = counter and redis.call('HGET', m.groups, conv)
  if unloaded(m, A.require_loaded) or (beyond_kept(m, A.require_loaded) and not st)
    or (not (large and m.role == '') and not write_member(m, st, where, large)) then
    unanswered[#unanswered + 1] = m.user
  end
end
if counter and advanced then applied = 1 end
-- On Redis Cluster the caller publishes it, once the clock moved.
if counter and (advanced or due) and keeps_clocks() then publish_conversation(A.channel, conv, seq) end
return answer(applied, counter, fresh, counter and (advanced or due), due and not keeps_clocks(), unanswered, joiners,
              deferred)
