-- The conversation's head as stored (its text, or '' without one), and
-- whether it is large (1 or 0): what a join on Redis Cluster hands to
-- members in other slots than the head's. Read in one step with recording
-- the joining users (record_joiners) while it is not large, so that the
-- message that makes it large either finds them recorded or comes before
-- this read, which then tells their parts it is large.
-- `users`: one per line (identifiers hold no control characters).
local K, A = declare {keys = {'head', 'group', 'joined'}, args = {'users'}}
local users = {}
for user in string.gmatch(A.users, '[^\n]+') do users[#users + 1] = user end
record_joiners(K, users)
return {redis.call('GET', K.head) or '', log_counter(K.group) and 1 or 0}
