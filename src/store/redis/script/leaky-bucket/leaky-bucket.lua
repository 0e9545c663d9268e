--[[
  Leaky bucket, policing or shaping. The level drains at the leak rate; a
  request passes when level + cost <= capacity. Shaping also says how long
  the admitted request waits for the units queued ahead of it. Mirrors
  model.ts line for line; tests hold the two equal. Called by the driver
  (../decide.lua).

  keys[1]  a hash {level, ts}, e.g. rl:v1:downstream:tenant:{acme}
  args[1]  capacity: units the bucket / queue holds (> 0)
  args[2]  rate: units leaking out per second (> 0)
  args[3]  cost: units this request adds (>= 0; a peek sends 0)
  args[4]  mode: 'policing' | 'shaping'
  now      unix ms (Redis TIME, or the test clock)

  Returns: { allowed (1|0), retry_after_ms, remaining, reset_after_ms, delay_ms }, write
    remaining is capacity - level; delay_ms is 0 unless shaping; write stores
    {level, ts = now} and expires the key when the bucket is empty (absent =
    empty); nil on a denial.
]]
A.leaky_bucket = function(keys, args, now)
  local capacity, rate, cost = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  local level, ts = 0, now
  local stored = redis.call('HMGET', keys[1], 'level', 'ts')
  if stored[1] and stored[2] then
    level, ts = tonumber(stored[1]), tonumber(stored[2])
  end
  local elapsed = math.max(0, now - ts)
  level = math.max(0, level - elapsed * rate / 1000)

  if level + cost > capacity then
    local retry_after_ms = math.ceil((level + cost - capacity) * 1000 / rate)
    return { 0, retry_after_ms, capacity - level, math.ceil(level * 1000 / rate), 0 }, nil
  end
  local delay_ms = 0
  if args[4] == 'shaping' then delay_ms = math.ceil(level * 1000 / rate) end
  level = level + cost
  local write = nil
  if cost > 0 then
    write = function()
      redis.call('HSET', keys[1], 'level', g17(level), 'ts', int(now))
      redis.call('PEXPIRE', keys[1], int(math.ceil(level * 1000 / rate)))
    end
  end
  return { 1, 0, capacity - level, math.ceil(level * 1000 / rate), delay_ms }, write
end

--[[
  Refund (driver mode 'refund'): drains to now, then takes `cost` back out of
  the bucket, never below empty; an empty bucket is deleted (absent = empty).
  Mirrors refundLeakyBucket in model.ts.
]]
R.leaky_bucket = function(keys, args, now, spent_at)
  local rate, cost = tonumber(args[2]), tonumber(args[3])
  local stored = redis.call('HMGET', keys[1], 'level', 'ts')
  if not (stored[1] and stored[2]) then return end
  local level = math.max(0, tonumber(stored[1]) - math.max(0, now - tonumber(stored[2])) * rate / 1000)
  level = math.max(0, level - cost)
  if level <= 0 then
    redis.call('DEL', keys[1])
    return
  end
  redis.call('HSET', keys[1], 'level', g17(level), 'ts', int(now))
  redis.call('PEXPIRE', keys[1], int(math.ceil(level * 1000 / rate)))
end

--[[
  Charge (driver mode 'charge'): drains to now, then adds `cost` without
  checking: the level may rise above the capacity (debt: later requests wait
  until it drains below capacity - cost), but never above twice the capacity.
  Mirrors chargeLeakyBucket in model.ts.
]]
C.leaky_bucket = function(keys, args, now)
  local capacity, rate, cost = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  if cost <= 0 then return end
  local level, ts = 0, now
  local stored = redis.call('HMGET', keys[1], 'level', 'ts')
  if stored[1] and stored[2] then
    level, ts = tonumber(stored[1]), tonumber(stored[2])
  end
  level = math.max(0, level - math.max(0, now - ts) * rate / 1000)
  level = math.max(level, math.min(level + cost, 2 * capacity))
  if level <= 0 then return end
  redis.call('HSET', keys[1], 'level', g17(level), 'ts', int(now))
  redis.call('PEXPIRE', keys[1], int(math.ceil(level * 1000 / rate)))
end
