-- Users' badges, in their order (a user's own call names one; a push
-- gateway's, up to 500). Reply per user: {'miss', version} (answer from the
-- SQL store) or {'ok', badge...}. On Redis Cluster one user's call that
-- asks for logs also answers as if none moved (with_standing).
local _, A, users = declare {
  args = {'require_loaded', 'max_conversations', 'max_kept', 'logs', 'conversations', 'clocks'},
  each = {keys = USER_KEYS, args = {'user'}},
}
local function answer()
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
end
local wanted = take_logs(A, users)
if wanted and #users == 1 then return with_standing(wanted, answer()) end
if wanted then return wanted end
return answer()
