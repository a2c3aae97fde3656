-- What clearing a category would clear: per user, every conversation of that
-- category (listed or kept) with something unread or marked unread.
-- Reply per user: user, n, then n rows of (conversation, last seq, unread).
local _, A, users = declare {
  args = {'category', 'max_conversations', 'max_kept', 'require_loaded', 'logs', 'conversations', 'clocks'},
  each = {keys = USER_KEYS, args = {'user'}},
}
local wanted = take_logs(A, users)
if wanted then return wanted end
local out = {}
for _, u in ipairs(users) do
  catch_up(u, A.max_conversations, A.max_kept)
  out[#out + 1] = u.user
  local count_at = #out + 1
  out[count_at] = 0
  for _, key in ipairs({u.conv, u.kept}) do
    local values = redis.call('HGETALL', key)
    for j = 1, #values, 2 do
      local st = decode_state(values[j + 1])
      if st.category == A.category and not has_flag(st, 'x') and (st.read < st.last or has_flag(st, 'u')) then
        out[count_at] = out[count_at] + 1
        out[#out + 1] = values[j]
        out[#out + 1] = int(st.last)
        out[#out + 1] = counted(st).unread
      end
    end
  end
end
return out
