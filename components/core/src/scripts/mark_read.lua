-- The user has seen everything up to seq (see read_up_to). Reply: a miss
-- ({'miss', version}: answer from the SQL store), or {status, read_seq,
-- unread, mentions, unmarked, badge...} with status 'ok', 'kept', 'early' or
-- 'gone', and unmarked '1' when the read took a mark-unread away.
local U, A = declare {
  keys = USER_KEYS,
  args = {'user', 'conversation', 'seq', 'ahead', 'max_conversations', 'max_kept', 'idle_ttl', 'require_loaded',
          'channel', 'logs', 'conversations', 'clocks'},
}
local wanted = take_logs(A, {U})
if wanted then return wanted end
-- With a SQL store this call wrote the truth first: the version moves whatever
-- it does here (even nothing, or a miss), so any rewrite from a truth read
-- before that write (a miss's rebuild, a reconcile, a call that found
-- another overtook it) is refused.
if A.require_loaded == '1' then bump(U) end
if (beyond_kept(U, A.require_loaded) and not find(U, A.conversation)) or not caught_up(U, A) then
  return {'miss', version(U)}
end
local status, read, now, moved, unmarked = read_up_to(U, A.conversation, tonumber(A.seq), tonumber(A.ahead),
  tonumber(A.max_kept))
if moved then publish(A.channel, A.user, A.conversation, now, U) end
if status == 'early' then idle(U, A.idle_ttl) end
return badge_reply(U, {status, read, now.unread, now.mentions, unmarked and '1' or '0'})
