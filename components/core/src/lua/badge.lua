-- The user's badge. ARGV: tenant, user.
return badge_reply(user_prefix(ARGV[1], ARGV[2]), {'ok'})
