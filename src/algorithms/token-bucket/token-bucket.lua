--[[
  Token bucket: read, refill, decide, spend and store as one atomic step
  (spec 3.2). Mirrors model.ts line for line; tests hold the two equal.

  KEYS[1]  the bucket, a hash {tokens, ts}, e.g. rl:v1:orders:user:{42}
  ARGV[1]  capacity: maximum tokens (> 0)
  ARGV[2]  rate: tokens added per second (> 0)
  ARGV[3]  cost: tokens this request spends (> 0)
  ARGV[4]  now, unix ms. Absent in production, where the clock is Redis TIME;
           only tests send it, to run on virtual time.

  Reply: { allowed (1|0), retry_after_ms, tokens, reset_after_ms }
    tokens is the balance after the decision, as a string ("%.17g"), because
    Redis truncates Lua numbers in replies to integers.
]]
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
if not now then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

local tokens = capacity
local ts = now
local stored = redis.call('HMGET', key, 'tokens', 'ts')
if stored[1] and stored[2] then
  tokens = tonumber(stored[1])
  ts = tonumber(stored[2])
end

local elapsed = math.max(0, now - ts)
tokens = math.min(capacity, tokens + elapsed * rate / 1000)

local allowed = 0
local retry_after_ms = 0
if tokens >= cost then
  allowed = 1
  tokens = tokens - cost
else
  retry_after_ms = math.ceil((cost - tokens) * 1000 / rate)
end

local tokens_text = string.format('%.17g', tokens)
redis.call('HSET', key, 'tokens', tokens_text, 'ts', string.format('%d', now))
redis.call('PEXPIRE', key, string.format('%d', math.ceil(capacity * 2000 / rate)))
return { allowed, retry_after_ms, tokens_text, math.ceil((capacity - tokens) * 1000 / rate) }
