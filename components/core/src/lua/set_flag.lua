-- Mutes, pins or marks unread one of the user's conversations. ARGV: tenant,
-- user, conversation, flag ('m' muted, 'p' pinned, 'u' marked unread), on
-- ('1'/'0'), max_pins, require_loaded ('1' with a SQL store).
-- Reply: a miss, {'unknown'}, {'too_many_pins'}, or {'ok', row..., badge...}.

local tenant, user, conv, flag, on = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5] == '1'
local max_pins = tonumber(ARGV[6])
local p = user_prefix(tenant, user)
local missed = miss(p, ARGV[7])
if missed then return missed end

local category = redis.call('HGET', p .. 'dir', conv)
if not category then return {'unknown'} end
local st = load_state(p, category, conv)
if has_flag(st, flag) ~= on then
  if flag == 'p' then
    if on and redis.call('HLEN', p .. 'pinned') >= max_pins then return {'too_many_pins'} end
    if on then redis.call('HSET', p .. 'pinned', conv, category) else redis.call('HDEL', p .. 'pinned', conv) end
  end
  local before = counted(st)
  set_flag(st, flag, on)
  save(tenant, user, category, conv, before, st)
end
return badge_reply(p, conversation_row({'ok'}, p, category, conv))
