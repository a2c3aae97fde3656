-- Large conversations' logs moved, on Redis Cluster, where the script that
-- moved a log cannot reach its clock (another slot): each clock takes its
-- log's counter, never going back (two messages' calls may end in either
-- order), unless the log is new (`fresh`: made again after Redis lost it;
-- a log made by an earlier build started over at 0); a `counter` of ''
-- forgets the conversation
-- (deleted). Then, if `announce` is a seq, the conversation's event for it:
-- after the clock, so that a push gateway the event makes ask sees the
-- message; when the call `logged` it, or else when this clock was behind
-- its log (the call's first try logged it and failed before its clock
-- moved: the event goes out with the try that moves it, where a replay
-- announces nothing); and, when this clock was behind, `also` (the head's
-- message, which may be what left it behind). (One Redis moves a clock in
-- the step that moves its log.) Reply: how many clocks changed.
local _, A, moves = declare {
  args = {'channel'},
  each = {keys = {'clock'}, args = {'conversation', 'counter', 'fresh', 'announce', 'logged', 'also'}},
}
local changed = 0
for _, m in ipairs(moves) do
  local held = tonumber(redis.call('HGET', m.clock, m.conversation) or '')
  local moved = false
  if m.counter == '' then
    if held then changed = changed + redis.call('HDEL', m.clock, m.conversation) end
  else
    local counter = tonumber(m.counter)
    if held ~= counter and (m.fresh == '1' or not held or counter > held) then
      redis.call('HSET', m.clock, m.conversation, int(counter))
      changed, moved = changed + 1, true
    end
  end
  if m.announce ~= '' and (m.logged == '1' or moved) then
    publish_conversation(A.channel, m.conversation, tonumber(m.announce))
  end
  if moved and m.also ~= '' and m.also ~= m.announce then
    publish_conversation(A.channel, m.conversation, tonumber(m.also))
  end
end
return changed
