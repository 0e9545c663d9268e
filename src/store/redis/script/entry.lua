-- The script's entry: one call (KEYS and ARGV as decide.lua documents them), or a
-- batch of calls (its "Batch" and "Node batch" sections). As a Redis Function
-- (decide-script.ts) this is the body of the function, KEYS and ARGV its
-- parameters.

begin_call()

if ARGV[1] ~= 'batch' and ARGV[1] ~= 'node-batch' then
  -- Room for a one-limit reply from the start (Lua 5.1 has no table.new):
  -- growing an empty table to 7 elements rehashes it 4 times.
  local reply = { nil, nil, nil, nil, nil, nil, nil }
  local m = decide(KEYS, ARGV, 0, 0, reply)
  if type(reply[1]) == 'number' then
    -- Each limit's remaining as text: Redis truncates a Lua number in a reply.
    for at = 4, m - 1, 5 do reply[at] = g17(reply[at]) end
  end
  return reply
end

-- Batch: every call in turn. An error in one call (a key of the wrong type,
-- say) answers that call with the error, as its own script call would have,
-- and the next call is decided; what the failed call wrote before its error
-- stays written, as in a separate script call.
-- The reply is one binary string (docs/decide-script.md, "Batch mode"):
-- struct.pack is cheaper for Redis than converting a Lua array, and the
-- service reads a packed double far faster than ioredis decodes a RESP array.
-- `reply` takes each call's reply in turn, so no table is made per call.
local pack = struct.pack
local DECISION_ONE, LIMIT, NOW, TEXT = '<BBdddd', '<Bdddd', '<d', '<BI4'
local KIND_TEXT, KIND_ERROR, KIND_ELSEWHERE = 2, 3, 4
local replies, reply, r = {}, {}, 0
-- keys: KEYS from k + 1 on; groups: ARGV from a + 1 on, after their count at ARGV[a].
local keys, k, a = KEYS, 0, 2
local node_batch = ARGV[1] == 'node-batch'
if node_batch then
  keys, a = ARGV, tonumber(ARGV[2]) + 3
  k = 2
end
for _ = 1, tonumber(ARGV[a]) do
  local ncalls, nkeys, nargs = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  -- The calls of a group share their ARGV, so their `now` (parse): sent once,
  -- first, instead of with every call's reply.
  r = r + 1
  replies[r] = pack(NOW, tonumber(ARGV[a + 5]) or redis_now())
  -- A node batch: a refund or a remember writes from its first command on,
  -- so it first asks whether this node serves every key of the call now (one
  -- EXISTS; all its keys share a slot). The other modes read first.
  local mode = ARGV[a + 4]
  local probe = node_batch and mode ~= 'spend' and mode ~= 'peek' and mode ~= 'check'
  for _ = 1, ncalls do
    local ok, m = true, 0
    writing = false
    local elsewhere = probe and redis.pcall('EXISTS', unpack(keys, k + 1, k + nkeys))
    if type(elsewhere) == 'table' then
      ok, m = false, elsewhere
    else
      ok, m = pcall(decide, keys, ARGV, k, a + 3, reply)
    end
    r = r + 1
    -- redis.call raises the reply's error text (a table), Lua its own message.
    local text = not ok and (type(m) == 'table' and m.err or tostring(m))
    if text and node_batch and not writing and string.sub(text, 1, 22) ~= 'QUOTA_OVERRIDES_STALE ' then
      -- It failed before writing anything (its node does not serve its keys
      -- now, typically): not run, the service sends it again where it belongs.
      -- A stale view of the overrides (override-guard.lua) ran here, found
      -- its answer, and is an error like any other.
      replies[r] = pack(TEXT, KIND_ELSEWHERE, #text) .. text
    elseif text then
      replies[r] = pack(TEXT, KIND_ERROR, #text) .. text
    elseif type(reply[1]) == 'number' then
      -- A decision: all_allowed (0 or 1, also its kind), then per limit its
      -- five fields; not its last element, now.
      if m == 7 then
        replies[r] = pack(DECISION_ONE, reply[1], reply[2], reply[3], reply[4], reply[5], reply[6])
      else
        local parts = { string.char(reply[1]) }
        for at = 2, m - 1, 5 do
          parts[#parts + 1] = pack(LIMIT, reply[at], reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4])
        end
        replies[r] = table.concat(parts)
      end
    else
      -- 'remembered', 'replay' and the remembered fields, or a settlement: one text.
      local text = table.concat(reply, ' ', 1, m)
      replies[r] = pack(TEXT, KIND_TEXT, #text) .. text
    end
    k = k + nkeys
  end
  a = a + 3 + nargs
end
return table.concat(replies)
