--[[
  Slices: a holder takes a share of a limit's available units in one atomic
  step, and gives back what it did not use. Mirrors sliceInMemory
  (clients/core/src/slices/slice-model.ts) step for step; property tests hold
  the two equal. Runs after the algorithms' files (slice-script.ts), through
  their A.<name> (decide) and R.<name> (refund): a slice is an ordinary
  spend of the limit, and its give-back an ordinary refund.

  KEYS     the limit's state keys (as its algorithm declares them), then the
           holder's slice record: a hash {u = units taken, at = when (unix ms),
           v = how long the slice may be used (ms)}
  ARGV[1]  'take' | 'give-back'
  ARGV[2]  now in unix ms, '' for Redis TIME (only tests send a time)
  ARGV[3]  the algorithm: token_bucket | gcra | fixed_window
  ARGV[4]  share (0 < share <= 1), ARGV[5] max_units (>= 1), ARGV[6] ttl_ms (>= 1)
  ARGV[7]  units of the holder's previous slice to give back (its unused part)
  ARGV[8..] the algorithm's args (args[3], the cost, is set here)

  First the previous slice, if its record is still there: at most what it
  held is refunded at the time it was taken (a fixed window gives back only
  into that window), and the record is dropped. Then, for 'take':
  floor(min(share * available now, max_units)) units are spent as one
  request (none when under 1), and recorded; the slice may be used for
  ttl_ms, and a fixed window's never past the end of its window. The record
  counts for twice that, so a give-back at the slice's end still finds it; a
  holder that never gives back loses its units (they stay spent).

  Reply    { taken, valid_ms, remaining ("%.17g"), returned ("%.17g"), now }
]]
local op, algorithm = ARGV[1], ARGV[3]
local decide, refund = A[algorithm], R[algorithm]
if decide == nil or refund == nil or (algorithm ~= 'token_bucket' and algorithm ~= 'gcra' and algorithm ~= 'fixed_window') then
  return redis.error_reply('ERR QUOTA_SLICE no slices for algorithm ' .. tostring(algorithm))
end
local now = tonumber(ARGV[2])
if not now then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
local share, max_units, ttl, give = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

-- A fixed window's length by name (its args[2], ARGV[9]), as fixed-window.lua reads it.
local WINDOWS = { second = 1000, minute = 60000, hour = 3600000, day = 86400000 }

local keys = {}
for i = 1, #KEYS - 1 do keys[i] = KEYS[i] end
local record = KEYS[#KEYS]

-- The algorithm's args at a given cost (args[3]).
local function costing(cost)
  local args = {}
  for i = 8, #ARGV do
    local v = ARGV[i]
    args[i - 7] = tonumber(v) or v
  end
  args[3] = cost
  return args
end

-- A record lapses twice its slice's life after the take, on the scripts'
-- clock; its key's expiry (twice ttl_ms, at least that) only cleans up.
local returned = 0
local stored = redis.call('HMGET', record, 'u', 'at', 'v')
if stored[1] and stored[2] and stored[3] then
  local at = tonumber(stored[2])
  if now <= at + 2 * tonumber(stored[3]) then
    returned = math.min(tonumber(stored[1]), math.max(0, give))
    -- A window counts whole units, and only its own: once the window the
    -- slice was taken in is over, nothing goes back (R.fixed_window agrees).
    if algorithm == 'fixed_window' then
      local window = WINDOWS[ARGV[9]] or tonumber(ARGV[9])
      returned = math.floor(returned)
      if at - (at % window) ~= now - (now % window) then returned = 0 end
    end
    if returned > 0 then refund(keys, costing(returned), now, at) end
  end
  redis.call('DEL', record)
end

local taken, valid = 0, 0
local remaining = decide(keys, costing(0), now)[3]
if op == 'take' then
  local units = math.floor(math.min(share * remaining, max_units))
  if units >= 1 then
    local args = costing(units)
    local outcome, write = decide(keys, args, now)
    if outcome[1] == 1 then
      if write then write(keys, args, now, outcome) end
      taken = units
      valid = ttl
      if algorithm == 'fixed_window' then valid = math.min(ttl, outcome[4]) end
      redis.call('HSET', record, 'u', int(taken), 'at', int(now), 'v', int(valid))
      redis.call('PEXPIRE', record, int(2 * ttl))
      remaining = outcome[3]
    end
  end
end
return { taken, valid, g17(remaining), g17(returned), now }
