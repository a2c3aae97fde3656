-- The user's badge. Reply: a miss ({'miss', version}) or {'ok', badge...}.
local U, A = declare {keys = USER_KEYS, args = {'require_loaded', 'max_conversations', 'max_kept', 'logs'}}
local wanted = take_logs(A.logs, {U})
if wanted then return wanted end
if unloaded(U, A.require_loaded) then return {'miss', version(U)} end
catch_up(U, A.max_conversations, A.max_kept)
return badge_reply(U, {'ok'})
