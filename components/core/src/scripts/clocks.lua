-- Large conversations' clocks, read for a call on Redis Cluster (one Redis
-- reads them inside the scripts, read_clocks in prelude.lua): each
-- conversation's log counter as its tenant's clock holds it, so that only
-- the logs that moved are read.
-- Reply: one text per conversation, the counter or '' (the clock holds none).
local _, _, wanted = declare {each = {keys = {'clock'}, args = {'conversation'}}}
-- One HMGET per clock key (a part may hold several of the tenant's).
local fields, order = {}, {}
for i, w in ipairs(wanted) do
  if not fields[w.clock] then
    fields[w.clock] = {}
    order[#order + 1] = w.clock
  end
  table.insert(fields[w.clock], i)
end
local out = {}
for _, key in ipairs(order) do
  local names = {}
  for j, i in ipairs(fields[key]) do names[j] = wanted[i].conversation end
  local values = redis.call('HMGET', key, unpack(names))
  for j, i in ipairs(fields[key]) do out[i] = values[j] or '' end
end
return out
