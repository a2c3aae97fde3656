-- A deleted conversation's keys go: none of its previews is kept for anyone,
-- and its clock goes with its log.
-- Reply: how many of its keys there were.
local K, A = declare {keys = CONVERSATION_KEYS, args = {'conversation', 'clocks'}}
use_clocks(A.clocks)
forget_clock(A.conversation)
return redis.call('DEL', K.head, K.recalls, K.earlier, K.group, K.joined, K.unannounced)
