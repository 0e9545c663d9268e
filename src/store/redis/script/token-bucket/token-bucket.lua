--[[
  Token bucket: read, refill, decide. Mirrors model.ts line for
  line; tests hold the two equal. Called by the driver (../decide.lua), which
  supplies `now` and runs the returned write only when the request is spent.

  keys[1]  the bucket, a hash {tokens, ts}, e.g. rl:v1:orders:user:{42}
  args[1]  capacity: maximum tokens (> 0)
  args[2]  rate: tokens added per second (> 0)
  args[3]  cost: tokens this request spends (>= 0; a peek sends 0)
  now      unix ms (Redis TIME, or the test clock)

  Returns: { allowed (1|0), retry_after_ms, tokens, reset_after_ms, 0 }, write
    tokens is the balance after the decision. The write stores tokens and
    ts = now, also on a denial (the refill, never a spend).
]]
-- The write: the balance after the decision (the outcome's tokens) and
-- ts = now. One function for every decision, given what it needs by the
-- driver: a closure per decision was garbage for Lua's collector.
local function write(keys, args, now, outcome)
  redis.call('HSET', keys[1], 'tokens', g17(outcome[3]), 'ts', int(now))
  redis.call('PEXPIRE', keys[1], int(math.ceil(tonumber(args[1]) * 2000 / tonumber(args[2]))))
end

A.token_bucket = function(keys, args, now)
  local capacity, rate, cost = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  local tokens, ts = capacity, now
  local stored = redis.call('HMGET', keys[1], 'tokens', 'ts')
  if stored[1] and stored[2] then
    tokens, ts = tonumber(stored[1]), tonumber(stored[2])
  end

  local elapsed = math.max(0, now - ts)
  tokens = math.min(capacity, tokens + elapsed * rate / 1000)

  local allowed, retry_after_ms = 0, 0
  if tokens >= cost then
    allowed = 1
    tokens = tokens - cost
  else
    retry_after_ms = math.ceil((cost - tokens) * 1000 / rate)
  end

  return { allowed, retry_after_ms, tokens, math.ceil((capacity - tokens) * 1000 / rate), 0 }, write
end

--[[
  Refund (driver mode 'refund'): gives back `cost` tokens a spend took, capped
  at the capacity, after refilling to now. An absent bucket is full already.
  Mirrors refundTokenBucket in model.ts.
]]
R.token_bucket = function(keys, args, now, spent_at)
  local capacity, rate, cost = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  local stored = redis.call('HMGET', keys[1], 'tokens', 'ts')
  if not (stored[1] and stored[2]) then return end
  local tokens, ts = tonumber(stored[1]), tonumber(stored[2])
  tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate / 1000)
  tokens = math.min(capacity, tokens + cost)
  redis.call('HSET', keys[1], 'tokens', g17(tokens), 'ts', int(now))
  redis.call('PEXPIRE', keys[1], int(math.ceil(capacity * 2000 / rate)))
end

--[[
  Charge (driver mode 'charge'): spends `cost` tokens without checking, after
  refilling to now: the balance may go below zero (debt: later requests wait
  until it refills), but never below -capacity, so the key's expiry still
  covers a refill to full. Mirrors chargeTokenBucket in model.ts.
]]
C.token_bucket = function(keys, args, now)
  local capacity, rate, cost = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  if cost <= 0 then return end
  local tokens, ts = capacity, now
  local stored = redis.call('HMGET', keys[1], 'tokens', 'ts')
  if stored[1] and stored[2] then
    tokens, ts = tonumber(stored[1]), tonumber(stored[2])
  end
  tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate / 1000)
  tokens = math.min(tokens, math.max(-capacity, tokens - cost))
  redis.call('HSET', keys[1], 'tokens', g17(tokens), 'ts', int(now))
  redis.call('PEXPIRE', keys[1], int(math.ceil(capacity * 2000 / rate)))
end
