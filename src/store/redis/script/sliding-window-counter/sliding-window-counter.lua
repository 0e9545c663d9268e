--[[
  Sliding window counter: estimated = current + previous *
  (1 - elapsed_fraction); passes when estimated + cost <= limit. Mirrors
  model.ts line for line; tests hold the two equal. Called by the driver
  (../decide.lua).

  keys[1]  a hash {w = start of the current window (unix ms), c = its count,
           p = the previous window's count}, e.g. rl:v1:api:user:{42}
  args[1]  limit: whole units per window (> 0)
  args[2]  window length in ms (any whole number: 60000 for a minute, 900000 for 15m)
  args[3]  cost: whole units this request spends (>= 0; a peek sends 0)
  now      unix ms (Redis TIME, or the test clock)

  Returns: { allowed (1|0), retry_after_ms, remaining, reset_after_ms, 0 }, write
    remaining is the whole units that would pass now; write stores the
    counters and expires them at the end of the next window (nil on a denial).
]]
A.sliding_window_counter = function(keys, args, now)
  local limit, window, cost = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  local start = now - (now % window)
  local current, previous = 0, 0
  local stored = redis.call('HMGET', keys[1], 'w', 'c', 'p')
  local w = tonumber(stored[1])
  if w and w >= start then
    start, current, previous = w, tonumber(stored[2]), tonumber(stored[3])
  elseif w and w == start - window then
    previous = tonumber(stored[2])
  end
  -- estimated * window: whole numbers, exact (see model.ts)
  local fading = previous * (window - (now - start))
  local scaled = current * window + fading

  local function reset_after()
    if current > 0 then return start + 2 * window - now end
    if previous > 0 then return start + window - now end
    return 0
  end

  if scaled + cost * window > limit * window then
    local room, retry = limit - cost - current, 0
    if room >= 0 then
      retry = start + window - math.floor(room * window / previous) - now
    else
      retry = start + 2 * window - math.floor((limit - cost) * window / current) - now
    end
    return { 0, retry, math.max(0, math.floor((limit * window - scaled) / window)), reset_after(), 0 }, nil
  end
  current = current + cost
  local write = nil
  if cost > 0 then
    write = function()
      redis.call('HSET', keys[1], 'w', int(start), 'c', int(current), 'p', int(previous))
      redis.call('PEXPIRE', keys[1], int(start + 2 * window - now))
    end
  end
  return { 1, 0, math.max(0, math.floor((limit * window - (current * window + fading)) / window)), reset_after(), 0 }, write
end

--[[
  Refund (driver mode 'refund'): takes `cost` back off the count of the window
  the spend fell in: the current count while that window is current, the
  previous one after a rollover, nothing once it is two windows old. Never
  below 0; the hash keeps its expiry. Mirrors refundSlidingWindowCounter.
]]
R.sliding_window_counter = function(keys, args, now, spent_at)
  local window, cost = tonumber(args[2]), tonumber(args[3])
  local spent_start = spent_at - (spent_at % window)
  local stored = redis.call('HMGET', keys[1], 'w', 'c', 'p')
  local w = tonumber(stored[1])
  if w == spent_start then
    redis.call('HSET', keys[1], 'c', int(math.max(0, tonumber(stored[2]) - cost)))
  elseif w == spent_start + window then
    redis.call('HSET', keys[1], 'p', int(math.max(0, tonumber(stored[3]) - cost)))
  end
end

--[[
  Charge (driver mode 'charge'): counts `cost` more in the current window
  without checking: the estimate may pass the limit (later requests wait for
  it to fade), but the current count never passes twice the limit. Mirrors
  chargeSlidingWindowCounter in model.ts.
]]
C.sliding_window_counter = function(keys, args, now)
  local limit, window, cost = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  if cost <= 0 then return end
  local start = now - (now % window)
  local current, previous = 0, 0
  local stored = redis.call('HMGET', keys[1], 'w', 'c', 'p')
  local w = tonumber(stored[1])
  if w and w >= start then
    start, current, previous = w, tonumber(stored[2]), tonumber(stored[3])
  elseif w and w == start - window then
    previous = tonumber(stored[2])
  end
  local add = math.min(cost, math.max(0, 2 * limit - current))
  if add <= 0 then return end
  redis.call('HSET', keys[1], 'w', int(start), 'c', int(current + add), 'p', int(previous))
  redis.call('PEXPIRE', keys[1], int(start + 2 * window - now))
end
