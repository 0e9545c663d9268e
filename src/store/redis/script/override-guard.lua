--[[
  Override guard (runtime overrides, docs/policies.md "Overrides"): checks, in
  the same atomic step as the decision and before anything is written, that
  the replica's view of the overrides that apply to a call is the store's.
  The driver (decide.lua) calls it when the call carries a generation.

  keys[k + 1]      the override generation of this slot (a string: a number)
  keys[k + 1 + i]  limit i's exact override, a hash {stamp, exp, rec}
  guard            { generation = what the replica applies,
                     stamps[i] = the stamp of the exact override it applies to
                                 limit i ('' for none),
                     wexp[i] = when the prefix override it applies to limit i
                               expires (unix ms; 0 for none or never) }
  now              the call's time

  Raises { err = 'QUOTA_OVERRIDES_STALE <stored generation>' } when the store
  has a newer generation, an exact override the replica does not know (or not
  that one, or one that expired), or when a prefix override it applies has
  expired. The service then reads the overrides again and decides anew.
]]
-- The generation read in this script call, for all its calls: on one node
-- they share one key; a node batch on a cluster master reads one of its
-- slots' keys, the first its calls reach, since a change of a prefix
-- override raises every slot's generation before the admin call returns, so
-- any slot's tells a stale view as well as the call's own (one GET per script
-- call instead of one per call, whose slots mostly differ). A read that
-- raises (the node does not serve that slot now) caches nothing.
local generation

local function check_overrides(keys, k, n, guard, now)
  local stored = generation
  if stored == nil then
    stored = tonumber(redis.call('GET', keys[k + 1])) or 0
    generation = stored
  end
  local stale = stored > guard.generation
  for i = 1, n do
    if stale then break end
    -- Most identities have no exact override: EXISTS answers that for less
    -- than an HMGET of two fields (a reply table Redis builds for the script).
    local key = keys[k + 1 + i]
    local o = redis.call('EXISTS', key) == 1 and redis.call('HMGET', key, 'stamp', 'exp')
    local live = ''
    if o and o[1] then
      local exp = tonumber(o[2]) or 0
      if exp == 0 or exp > now then live = o[1] end
    end
    local wexp = guard.wexp[i]
    stale = live ~= guard.stamps[i] or (wexp ~= 0 and wexp <= now)
  end
  if stale then error({ err = 'QUOTA_OVERRIDES_STALE ' .. stored }) end
end
