-- Mode 'settle' of the driver (decide.lua documents the protocol; driver-state.lua
-- holds the helpers this uses).

--[[
  Mode 'settle' (header): reads the reservation at `memo` ("<decision reply>
  <cost> <spent_at x count> <settled>", written by a spend with a memo),
  adjusts this call's limits by actual - estimate and marks it settled, once.
  Writes reply[1 .. m] and returns m.
]]
local function settle(call, limits, n, memo, now, reply)
  reply[1] = 'settle'
  local seen = redis.call('GET', memo)
  if not seen or seen == 'pending' then
    reply[2] = seen and 'pending' or 'unknown'
    return 2
  end
  local fields, f = {}, 0
  for field in string.gmatch(seen, '%S+') do
    f = f + 1
    fields[f] = field
  end
  local count = (f - 4) / 6
  if count < 1 or count ~= math.floor(count) then
    reply[2] = 'unknown'
    return 2
  end
  if fields[1] ~= '1' then
    reply[2] = 'denied'
    return 2
  end
  local base = 5 * count + 3
  local actual, status = tonumber(fields[f]), 'settled'
  if fields[f] == '-' then
    status, actual = 'applied', tonumber(call.memo_arg)
    local delta = actual - tonumber(fields[base])
    local spent_at = tonumber(fields[base + call.spent_at])
    writing = true
    if delta ~= 0 then
      for i = 1, n do
        local limit = limits[i]
        -- A check-only limit spent nothing; one without C.<name> counts no units (a lease).
        if not limit.check and C[limit.name] then
          if delta < 0 then
            R[limit.name](limit.keys, costing(limit.args, -delta), now, spent_at)
          else
            C[limit.name](limit.keys, costing(limit.args, delta), now)
          end
        end
      end
    end
    redis.call('SET', memo, string.sub(seen, 1, -2) .. g17(actual), 'KEEPTTL')
  end
  reply[2], reply[3], reply[4], reply[5] = status, fields[base], g17(actual), int(count)
  local m = 5
  for i = 1, count do
    m = m + 1
    reply[m] = fields[base + i]
  end
  m = m + 1
  reply[m] = '1'
  for i = 1, n do
    local o = unchanged(limits[i], limits[i].keys, now)
    reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = int(o[1]), int(o[2]), g17(o[3]), int(o[4]), int(o[5])
    m = m + 5
  end
  m = m + 1
  reply[m] = int(now)
  return m
end
