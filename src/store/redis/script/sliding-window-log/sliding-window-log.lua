--[[
  Sliding window log: one sorted-set entry per unit accepted, an exact rolling
  window (now - window, now]. Mirrors model.ts; tests hold the two equal.
  Called by the driver (../decide.lua).

  keys[1]  a sorted set, score = unix ms of the accept, member = "<ms>:<n>"
           (n counts the entries of that ms, so entries of one millisecond
           never collapse into one), e.g. rl:v1:api:user:{42}
  args[1]  limit: whole units in any rolling window (> 0)
  args[2]  window length in ms (any whole number: 60000 for a minute, 900000 for 15m)
  args[3]  cost: whole units this request spends (>= 0; a peek sends 0)
  now      unix ms (Redis TIME, or the test clock)

  Returns: { allowed (1|0), retry_after_ms, remaining, reset_after_ms, 0 }, write
    write drops entries that left the window, logs cost entries stamped now
    and expires the set a window after now (nil on a denial: a rejected
    request stores nothing). At most limit entries are ever live.
]]
A.sliding_window_log = function(keys, args, now)
  local limit, window, cost = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  local key, after = keys[1], '(' .. int(now - window)
  local count = redis.call('ZCOUNT', key, after, '+inf')
  local newest = nil
  if count > 0 then newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]) end
  local function reset_after(at)
    if at then return at + window - now end
    return 0
  end

  if count + cost > limit then
    -- The entry whose expiry leaves room for cost.
    local freeing = redis.call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', count + cost - limit - 1, 1)
    return { 0, tonumber(freeing[2]) + window - now, limit - count, reset_after(newest), 0 }, nil
  end
  if cost == 0 then return { 1, 0, limit - count, reset_after(newest), 0 }, nil end
  return { 1, 0, limit - count - cost, reset_after(math.max(newest or now, now)), 0 }, function()
    local stamp = int(now)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - window))
    local n = redis.call('ZCOUNT', key, stamp, stamp)
    for i = 1, cost do
      redis.call('ZADD', key, stamp, stamp .. ':' .. (n + i))
    end
    redis.call('PEXPIRE', key, int(window))
  end
end

--[[
  Refund (driver mode 'refund'): removes `cost` entries stamped spent_at, the
  newest members first ("<ms>:<n>" counts up from 1 within a millisecond, so
  the members left stay "<ms>:1".."<ms>:m" and the next spend continues at
  m + 1). Redis deletes a set left empty. Mirrors refundSlidingWindowLog.
]]
R.sliding_window_log = function(keys, args, now, spent_at)
  local cost = tonumber(args[3])
  local stamp = int(spent_at)
  local m = redis.call('ZCOUNT', keys[1], stamp, stamp)
  for n = m, math.max(1, m - cost + 1), -1 do
    redis.call('ZREM', keys[1], stamp .. ':' .. n)
  end
end

--[[
  Charge (driver mode 'charge'): logs `cost` more entries stamped now without
  checking: the window may hold more than the limit (later requests wait for
  entries to leave it), but never more than twice the limit, which also
  bounds the script's work. Mirrors chargeSlidingWindowLog in model.ts.
]]
C.sliding_window_log = function(keys, args, now)
  local limit, window, cost = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  if cost <= 0 then return end
  local key = keys[1]
  local count = redis.call('ZCOUNT', key, '(' .. int(now - window), '+inf')
  local add = math.min(cost, math.max(0, 2 * limit - count))
  if add <= 0 then return end
  local stamp = int(now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - window))
  local n = redis.call('ZCOUNT', key, stamp, stamp)
  for i = 1, add do
    redis.call('ZADD', key, stamp, stamp .. ':' .. (n + i))
  end
  redis.call('PEXPIRE', key, int(window))
end
