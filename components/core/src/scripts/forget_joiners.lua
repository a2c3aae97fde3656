-- Users who joined a conversation before the message that made it large,
-- handed to the caller by its messages (recorded_joiners), are members of
-- its log now, or left it: the record forgets them, so later messages hand
-- them over no more.
-- `users`: one per line (identifiers hold no control characters).
-- Reply: how many were forgotten.
local K, A = declare {keys = {'joined'}, args = {'users'}}
local forgotten = 0
for user in string.gmatch(A.users, '[^\n]+') do forgotten = forgotten + redis.call('ZREM', K.joined, user) end
return forgotten
