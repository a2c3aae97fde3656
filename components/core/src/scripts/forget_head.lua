-- A deleted conversation's keys go: none of its previews is kept for anyone.
-- Reply: how many of its keys there were.
local K = declare {keys = CONVERSATION_KEYS}
return redis.call('DEL', K.head, K.recalls, K.earlier, K.group)
