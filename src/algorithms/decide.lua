--[[
  Driver: decides every limit of a request in one atomic step, then writes all
  or none (spec 3.3). decide-script.ts assembles the script as
  `local A = {}`, then each algorithm's .lua (each defines A.<name>), then this.

  KEYS     the keys of every limit, in order: limit i takes the next nkeys_i
  ARGV[1]  mode: 'spend' (write when every limit allows; a denying limit may
           still store its refill, which never spends) or 'peek' (write nothing)
  ARGV[2]  now, unix ms; '' in production, where the clock is Redis TIME (only
           tests send it, to run on virtual time)
  ARGV[3]  the number of limits; then per limit:
           algorithm name, nkeys_i, nargs_i, and nargs_i arguments

  Reply: { all_allowed (1|0), then per limit:
           allowed (1|0), retry_after_ms, remaining, reset_after_ms, delay_ms }
    remaining is a string ("%.17g"): Redis truncates Lua numbers in replies.
]]
local now = tonumber(ARGV[2])
if not now then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

local outcomes, writes, all = {}, {}, 1
local k, a = 0, 3
for i = 1, tonumber(ARGV[3]) do
  local decide = A[ARGV[a + 1]]
  local nkeys, nargs = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local keys, args = {}, {}
  for j = 1, nkeys do keys[j] = KEYS[k + j] end
  for j = 1, nargs do args[j] = ARGV[a + 3 + j] end
  k, a = k + nkeys, a + 3 + nargs
  outcomes[i], writes[i] = decide(keys, args, now)
  if outcomes[i][1] == 0 then all = 0 end
end

local reply = { all }
for i, o in ipairs(outcomes) do
  if ARGV[1] == 'spend' and writes[i] and (all == 1 or o[1] == 0) then writes[i]() end
  reply[#reply + 1] = o[1]
  reply[#reply + 1] = o[2]
  reply[#reply + 1] = string.format('%.17g', o[3])
  reply[#reply + 1] = o[4]
  reply[#reply + 1] = o[5]
end
return reply
