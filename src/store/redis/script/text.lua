--[[
  Numbers as text for Redis, exactly as string.format gives them, remembered
  for the script call: formatting (printf) was about 8% of Redis's CPU in a
  perf profile of batched token bucket decisions, a batch writes the same
  `now` and the same expiry call after call, and the driver's reply repeats
  the balance the write just formatted. Defined before the algorithms
  (decide-script.ts), which use them for every number they write.
]]

-- string.format('%d', n), cached by n (NaN, which cannot be a table key, is not cached).
local int_texts = {}
local function int(n)
  if n ~= n then return string.format('%d', n) end
  local text = int_texts[n]
  if text == nil then
    text = string.format('%d', n)
    int_texts[n] = text
  end
  return text
end

-- string.format('%.17g', x), remembering the last one (0 is not: -0 == 0 but prints '-0').
local g17_last, g17_text
local function g17(x)
  if x ~= g17_last or x == 0 then
    g17_text = string.format('%.17g', x)
    g17_last = x
  end
  return g17_text
end
