-- Large conversations' clocks, read for a call on Redis Cluster (one Redis
-- reads them inside the scripts, read_clocks in prelude.lua): each
-- conversation's log counter as its tenant's clock holds it, so that only
-- the logs that moved are read.
-- Reply: one text per conversation, the counter or '' (the clock holds none).
local _, _, wanted = declare {each = {keys = {'clock'}, args = {'conversation'}}}
local keys, convs = {}, {}
for i, w in ipairs(wanted) do keys[i], convs[i] = w.clock, w.conversation end
local out = {}
for i, value in ipairs(hmget_each(keys, convs)) do out[i] = value or '' end
return out
