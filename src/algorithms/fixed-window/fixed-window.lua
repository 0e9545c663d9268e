--[[
  Fixed window counter (spec 3.1): one counter per identity and window, the
  window stamp taken from the store's clock. The counter is created with its
  expiry in the same SET, so no counter key can ever live forever.
  Mirrors model.ts; tests hold the two equal. Called by the driver
  (../decide.lua), which runs the returned write only when the request is spent.

  keys[1]  counter key prefix, e.g. rl:v1:per-user:user:{42}:minute; the
           counter is keys[1] .. ':' .. <UTC stamp of the window start>, which
           shares keys[1]'s hash tag and so its cluster slot
  args[1]  limit: whole units granted per window (> 0)
  args[2]  window: 'second' | 'minute' | 'hour' | 'day'
  args[3]  cost: whole units this request spends (>= 0; a peek sends 0)
  now      unix ms (Redis TIME, or the test clock)

  Returns: { allowed (1|0), retry_after_ms, remaining, reset_after_ms, 0 }, write
    remaining is limit - units spent in this window after the decision; write
    is nil when nothing is spent (a denial writes nothing).
]]
-- window name -> { length in ms, digits of yyyymmddHHMMSS that name it }
local WINDOWS = { second = { 1000, 14 }, minute = { 60000, 12 }, hour = { 3600000, 10 }, day = { 86400000, 8 } }

-- yyyymmddHHMMSS of a unix ms time, in UTC (Howard Hinnant's civil_from_days).
local function utc_stamp(ms)
  local secs = math.floor(ms / 1000)
  local days = math.floor(secs / 86400)
  local rem = secs - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local day = doy - math.floor((153 * mp + 2) / 5) + 1
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400 + (month <= 2 and 1 or 0)
  return string.format('%04d%02d%02d%02d%02d%02d', year, month, day,
    math.floor(rem / 3600), math.floor((rem % 3600) / 60), rem % 60)
end

A.fixed_window = function(keys, args, now)
  local limit, window, cost = tonumber(args[1]), WINDOWS[args[2]], tonumber(args[3])
  local start = now - (now % window[1])
  local key = keys[1] .. ':' .. string.sub(utc_stamp(start), 1, window[2])
  local reset_after_ms = start + window[1] - now
  local count = tonumber(redis.call('GET', key) or '0')

  if count + cost > limit then
    return { 0, reset_after_ms, limit - count, reset_after_ms, 0 }, nil
  end
  local write = nil
  if count + cost == 0 then return { 1, 0, limit, 0, 0 }, nil end -- a peek at an unused window: full, nothing to reset
  if cost > 0 then
    write = function()
      if count == 0 then
        redis.call('SET', key, string.format('%d', cost), 'PX', string.format('%d', reset_after_ms))
      else
        redis.call('INCRBY', key, string.format('%d', cost))
      end
    end
  end
  return { 1, 0, limit - count - cost, reset_after_ms, 0 }, write
end

--[[
  Refund (driver mode 'refund'): takes `cost` back off the counter of the
  window the spend fell in (spent_at), never below 0; the counter keeps its
  expiry. Once that window is over there is nothing to give back: its count
  no longer matters. Mirrors the fixed window's refundInMemory.
]]
R.fixed_window = function(keys, args, now, spent_at)
  local window, cost = WINDOWS[args[2]], tonumber(args[3])
  local key = keys[1] .. ':' .. string.sub(utc_stamp(spent_at - (spent_at % window[1])), 1, window[2])
  local count = tonumber(redis.call('GET', key) or '0')
  if count > 0 then redis.call('DECRBY', key, string.format('%d', math.min(count, cost))) end
end
