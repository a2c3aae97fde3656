-- A deleted conversation's head and pending recall previews go: its
-- preview is not kept for anyone.
-- Reply: how many of the two keys there were.
local K = declare {keys = CONVERSATION_KEYS}
return redis.call('DEL', K.head, K.recalls)
