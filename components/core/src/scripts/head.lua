-- The conversation's head as stored (its text, or '' without one), and
-- whether the conversation is large (1 or 0): what a join on Redis Cluster
-- hands to members in other slots than the head's.
local K = declare {keys = {'head', 'group'}}
return {redis.call('GET', K.head) or '', log_counter(K.group) and 1 or 0}
