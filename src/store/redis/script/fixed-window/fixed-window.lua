--[[
  Fixed window counter: one counter per identity and limit, in
  one declared key that carries the start of the window it counts, the
  window taken from the store's clock. A counter of an earlier window counts
  as 0 and is replaced; the key expires at the end of its window. Mirrors
  model.ts; tests hold the two equal. Called by the driver (../decide.lua),
  which runs the returned write only when the request is spent.

  keys[1]  the counter, a hash {w = window start (unix ms), c = units spent
           in it}, e.g. rl:v1:per-user:user:{42}:minute. Every key the script
           reads or writes is declared, so it follows ASK during a slot
           migration like any other.
  args[1]  limit: whole units granted per window (> 0)
  args[2]  window: 'second' | 'minute' | 'hour' | 'day', or a length in ms
  args[3]  cost: whole units this request spends (>= 0; a peek sends 0)
  now      unix ms (Redis TIME, or the test clock)

  Returns: { allowed (1|0), retry_after_ms, remaining, reset_after_ms, 0 [, count] }, write
    remaining is limit - units spent in this window after the decision; write
    is nil when nothing is spent (a denial writes nothing). An allowed outcome
    carries the count before it (for write; the driver replies with the first
    five elements).
]]
-- window name -> length in ms (UTC-aligned: unix time is)
local WINDOWS = { second = 1000, minute = 60000, hour = 3600000, day = 86400000 }

-- The write of an allowed spend; outcome[6] is the count before it. One
-- function for every decision, given what it needs by the driver: a closure
-- per decision was garbage for Lua's collector.
local function write(keys, args, now, outcome)
  local cost = tonumber(args[3])
  if outcome[6] == 0 then
    -- A new window: replace the counter and expire it with its window.
    local window = WINDOWS[args[2]] or tonumber(args[2])
    redis.call('HSET', keys[1], 'w', int(now - (now % window)), 'c', int(cost))
    redis.call('PEXPIRE', keys[1], int(outcome[4]))
  else
    redis.call('HINCRBY', keys[1], 'c', int(cost))
  end
end

A.fixed_window = function(keys, args, now)
  local limit, window, cost = tonumber(args[1]), WINDOWS[args[2]] or tonumber(args[2]), tonumber(args[3])
  local start = now - (now % window)
  local reset_after_ms = start + window - now
  local stored = redis.call('HMGET', keys[1], 'w', 'c')
  local count = 0
  if tonumber(stored[1]) == start then count = tonumber(stored[2]) end

  if count + cost > limit then
    return { 0, reset_after_ms, limit - count, reset_after_ms, 0 }, nil
  end
  if count + cost == 0 then return { 1, 0, limit, 0, 0 }, nil end -- a peek at an unused window: full, nothing to reset
  return { 1, 0, limit - count - cost, reset_after_ms, 0, count }, cost > 0 and write or nil
end

--[[
  Refund (driver mode 'refund'): takes `cost` back off the counter when it
  still counts the window the spend fell in (spent_at), never below 0; the
  key keeps its expiry. Once that window is over there is nothing to give
  back: its count no longer matters. Mirrors the fixed window's refundInMemory.
]]
R.fixed_window = function(keys, args, now, spent_at)
  local window, cost = WINDOWS[args[2]] or tonumber(args[2]), tonumber(args[3])
  local stored = redis.call('HMGET', keys[1], 'w', 'c')
  if tonumber(stored[1]) ~= spent_at - (spent_at % window) then return end
  local count = tonumber(stored[2])
  redis.call('HSET', keys[1], 'c', int(count - math.min(count, cost)))
end

--[[
  Charge (driver mode 'charge'): counts `cost` more in the window of now
  without checking: the count may pass the limit (later requests of that
  window are denied), but never twice the limit. Mirrors the fixed window's
  chargeInMemory.
]]
C.fixed_window = function(keys, args, now)
  local limit, window, cost = tonumber(args[1]), WINDOWS[args[2]] or tonumber(args[2]), tonumber(args[3])
  if cost <= 0 then return end
  local start = now - (now % window)
  local stored = redis.call('HMGET', keys[1], 'w', 'c')
  local count = 0
  if tonumber(stored[1]) == start then count = tonumber(stored[2]) end
  local add = math.min(cost, math.max(0, 2 * limit - count))
  if add <= 0 then return end
  if count == 0 then
    redis.call('HSET', keys[1], 'w', int(start), 'c', int(add))
    redis.call('PEXPIRE', keys[1], int(start + window - now))
  else
    redis.call('HINCRBY', keys[1], 'c', int(add))
  end
end
