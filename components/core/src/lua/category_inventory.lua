-- What clearing a category would clear. ARGV: tenant, category, users...
-- Reply per user: user, n, then n rows of (conversation, last_seq, unread)
-- for each conversation of that category with something to clear.

local tenant, category = ARGV[1], ARGV[2]
local out = {}
for i = 3, #ARGV do
  local p = user_prefix(tenant, ARGV[i])
  local values = redis.call('HGETALL', conv_key(p, category))
  out[#out + 1] = ARGV[i]
  local count_at = #out + 1
  out[count_at] = 0
  for j = 1, #values, 2 do
    local st = decode_state(values[j + 1])
    if st.read < st.last or has_flag(st, 'u') then
      out[count_at] = out[count_at] + 1
      out[#out + 1] = values[j]
      out[#out + 1] = int(st.last)
      out[#out + 1] = counted(st).unread
    end
  end
end
return out
