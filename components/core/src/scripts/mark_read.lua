-- The user has seen everything up to seq (see read_up_to). Reply: a miss
-- ({'miss', version}: answer from the SQL store), or {status, read_seq,
-- unread, mentions, badge...} with status 'ok', 'kept', 'early' or 'gone'.
local U, A = declare {
  keys = USER_KEYS,
  args = {'user', 'conversation', 'seq', 'ahead', 'max_conversations', 'max_kept', 'idle_ttl', 'require_loaded',
          'channel', 'logs', 'conversations', 'clocks'},
}
local wanted = take_logs(A, {U})
if wanted then return wanted end
if (beyond_kept(U, A.require_loaded) and not find(U, A.conversation)) or not caught_up(U, A) then
  return {'miss', version(U)}
end
local status, read, now, moved = read_up_to(U, A.conversation, tonumber(A.seq), tonumber(A.ahead),
  tonumber(A.max_kept))
if moved then publish(A.channel, A.user, A.conversation, now, U) end
if status == 'early' then idle(U, A.idle_ttl) end
return badge_reply(U, {status, read, now.unread, now.mentions})
