-- The state versions of users, read before their truth is read from SQL.
-- ARGV: tenant, users...
local out = {}
for i = 2, #ARGV do
  out[#out + 1] = version(user_prefix(ARGV[1], ARGV[i]))
end
return out
