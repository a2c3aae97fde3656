-- A deleted conversation's head goes: its preview is not kept for anyone.
-- Reply: 1 if there was one.
local K = declare {keys = {'head'}}
return redis.call('DEL', K.head)
