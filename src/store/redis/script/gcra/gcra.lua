--[[
  GCRA (generic cell rate algorithm): one timestamp per key, the token
  bucket's guarantees. Mirrors model.ts line for line; tests hold the two
  equal. Called by the driver (../decide.lua).

  keys[1]  a string: tat, the theoretical arrival time (unix ms, "%.17g"),
           when the limit is full again, e.g. rl:v1:api:user:{42}
  args[1]  capacity: the largest burst, units (> 0)
  args[2]  rate: units per second (> 0)
  args[3]  cost: units this request spends (>= 0; a peek sends 0)
  now      unix ms (Redis TIME, or the test clock)

  Returns: { allowed (1|0), retry_after_ms, remaining, reset_after_ms, 0 }, write
    write stores the new tat and expires the key when the limit is full
    again (an absent key means full); nil on a denial or for cost 0.
]]
local SLACK_MS = 0.01 -- GCRA_SLACK_MS in model.ts: rounding never denies the last unit of a burst

A.gcra = function(keys, args, now)
  local capacity, rate, cost = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  local interval = 1000 / rate
  local tau = capacity * interval
  local backlog = math.max(0, tonumber(redis.call('GET', keys[1]) or now) - now)
  local after = backlog + cost * interval

  if after - tau > SLACK_MS then
    return { 0, math.ceil(after - tau - SLACK_MS), math.max(0, capacity - backlog / interval), math.ceil(backlog), 0 }, nil
  end
  local write = nil
  if cost > 0 then
    write = function()
      redis.call('SET', keys[1], g17(now + after), 'PX', int(math.ceil(after)))
    end
  end
  return { 1, 0, math.max(0, capacity - after / interval), math.ceil(after), 0 }, write
end

--[[
  Refund (driver mode 'refund'): moves tat `cost` emission intervals back;
  a tat no later than now means full, so the key is deleted. Mirrors
  refundGcra in model.ts.
]]
R.gcra = function(keys, args, now, spent_at)
  local rate, cost = tonumber(args[2]), tonumber(args[3])
  local interval = 1000 / rate
  local stored = tonumber(redis.call('GET', keys[1]))
  if not stored then return end
  local tat = stored - cost * interval
  if tat - now <= 0 then
    redis.call('DEL', keys[1])
    return
  end
  redis.call('SET', keys[1], g17(tat), 'PX', int(math.ceil(tat - now)))
end

--[[
  Charge (driver mode 'charge'): moves tat `cost` emission intervals later
  without checking, so it may run more than the burst ahead of now (debt:
  later requests wait), but at most two bursts ahead (a balance of -capacity).
  Mirrors chargeGcra in model.ts.
]]
C.gcra = function(keys, args, now)
  local capacity, rate, cost = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  if cost <= 0 then return end
  local interval = 1000 / rate
  local backlog = math.max(0, tonumber(redis.call('GET', keys[1]) or now) - now)
  local after = math.max(backlog, math.min(backlog + cost * interval, 2 * capacity * interval))
  if after <= 0 then return end
  redis.call('SET', keys[1], g17(now + after), 'PX', int(math.ceil(after)))
end
