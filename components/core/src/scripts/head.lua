-- The conversation's head as stored (its text), or '' without one: what a
-- join on Redis Cluster hands to members in other slots than the head's.
local K = declare {keys = {'head'}}
return redis.call('GET', K.head) or ''
