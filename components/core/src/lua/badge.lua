-- The user's badge. ARGV: tenant, user, require_loaded ('1' with a SQL store).
local p = user_prefix(ARGV[1], ARGV[2])
return miss(p, ARGV[3]) or badge_reply(p, {'ok'})
