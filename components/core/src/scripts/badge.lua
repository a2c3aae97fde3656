-- Users' badges, in their order (a user's own call names one; a push
-- gateway's, up to 500). Reply per user: {'miss', version} (answer from the
-- SQL store) or {'ok', badge...}.
local _, A, users = declare {
  args = {'require_loaded', 'max_conversations', 'max_kept', 'logs', 'conversations', 'clocks'},
  each = {keys = USER_KEYS, args = {'user'}},
}
local wanted = take_logs(A, users)
if wanted then return wanted end
local out = {}
for _, u in ipairs(users) do
  if caught_up(u, A) then
    out[#out + 1] = 'ok'
    badge_reply(u, out)
  else
    out[#out + 1] = 'miss'
    out[#out + 1] = version(u)
  end
end
return out
