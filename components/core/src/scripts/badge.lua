-- The user's badge. Reply: a miss ({'miss', version}) or {'ok', badge...}.
local U, A = declare {keys = USER_KEYS, args = {'require_loaded'}}
if unloaded(U, A.require_loaded) then return {'miss', version(U)} end
return badge_reply(U, {'ok'})
