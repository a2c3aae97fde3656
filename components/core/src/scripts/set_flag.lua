-- Mutes, pins or marks unread one of the user's conversations (flag 'm',
-- 'p' or 'u'). Pinning a conversation that was trimmed lists it again.
-- Reply: a miss ({'miss', version}), {'unknown'}, {'too_many_pins'}, or
-- {'ok', row..., badge...}.
local U, A = declare {
  keys = USER_KEYS,
  args = {'user', 'conversation', 'flag', 'on', 'max_pins', 'max_conversations', 'max_kept', 'require_loaded',
          'channel', 'head_ttl', 'logs', 'conversations', 'clocks'},
}
local wanted = take_logs(A, {U})
if wanted then return wanted end
-- With a SQL store this call wrote the truth first: the version moves whatever
-- it does here (even nothing, or a miss), so any rewrite from a truth read
-- before that write (a miss's rebuild, a reconcile, a call that found
-- another overtook it) is refused.
if A.require_loaded == '1' then bump(U) end
local conv, flag, on = A.conversation, A.flag, A.on == '1'
if (beyond_kept(U, A.require_loaded) and not find(U, conv)) or not caught_up(U, A) then
  return {'miss', version(U)}
end
local st, where = find(U, conv)
if not st or has_flag(st, 'x') or st.last == 0 then return {'unknown'} end

if has_flag(st, flag) ~= on then
  if flag == 'p' and on and redis.call('HLEN', U.pinned) >= tonumber(A.max_pins) then
    return {'too_many_pins'}
  end
  local before = where == 'conv' and counted(st) or NOTHING
  set_flag(st, flag, on)
  if where == 'kept' and not (flag == 'p' and on) then
    keep(U, conv, st, tonumber(A.max_kept))
  else
    if where == 'kept' then enlist(U, conv, st, st.score) end
    if flag == 'p' then
      if on then redis.call('HSET', U.pinned, conv, '1') else redis.call('HDEL', U.pinned, conv) end
    end
    local now = save(U, conv, before, st)
    -- A new pin may push the oldest out; a pin let go may let a newer one in.
    local moved = flag == 'p' and rebalance(U, tonumber(A.max_conversations), tonumber(A.max_kept))
    -- The truth fills the list (rebalance): it answers, and the user is rebuilt.
    if unloaded(U, A.require_loaded) then return {'miss', version(U)} end
    if differs(before, now) or moved then publish(A.channel, A.user, conv, counted(find(U, conv)), U) end
  end
end

st, where = find(U, conv)
local score = st.score
if where == 'conv' then score = redis.call('ZSCORE', U.list, conv) end
return badge_reply(U, conversation_row({'ok'}, U, conv, st, score, A.head_ttl))
