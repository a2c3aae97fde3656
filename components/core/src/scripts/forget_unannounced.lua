-- On Redis Cluster, a large conversation's message that a rebuild noted
-- (note_unannounced) was announced by its touch once its clock moved: the
-- note goes, unless it is another message's by now (a later rebuild's).
-- Reply: 1 if it went, else 0.
local K, A = declare {keys = {'unannounced'}, args = {'seq'}}
return unannounced(K, tonumber(A.seq), true) and 1 or 0
