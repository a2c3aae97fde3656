-- The state versions of users, read before their truth is read from SQL.
local _, _, users = declare {each = {keys = {'meta'}}}
local out = {}
for _, u in ipairs(users) do out[#out + 1] = version(u) end
return out
