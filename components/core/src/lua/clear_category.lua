-- Clears one category: each listed conversation is read up to the given seq
-- and loses its mark-unread flag; nothing outside the category's key space
-- is read as a target. ARGV: tenant, category, then per user: user, n, then
-- n pairs of (conversation, seq).

local tenant, category = ARGV[1], ARGV[2]
local i = 3
while i <= #ARGV do
  local user, n = ARGV[i], tonumber(ARGV[i + 1])
  local p = user_prefix(tenant, user)
  for j = i + 2, i + 2 * n, 2 do
    local conv, seq = ARGV[j], tonumber(ARGV[j + 1])
    local st = load_state(p, category, conv)
    if st and (seq > st.read or has_flag(st, 'u')) then
      local before = counted(st)
      st.read = math.max(st.read, seq)
      set_flag(st, 'u', false)
      save(tenant, user, category, conv, before, st)
    end
  end
  i = i + 2 + 2 * n
end
return 'ok'
