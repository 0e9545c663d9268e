-- The driver's shared state and helpers (decide.lua documents the protocol): the
-- clock, argument parsing, and the tables and flags one call after another reuses.
-- decide-script.ts puts this first, then settle.lua, decide.lua and entry.lua.

-- Redis TIME, read at most once per script call: a batch decides at one instant.
local clock
local function redis_now()
  if not clock then
    local time = redis.call('TIME')
    clock = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  end
  return clock
end

-- A limit's args with another cost (args[3]).
local function costing(args, cost)
  local copy = {}
  for j, v in ipairs(args) do copy[j] = v end
  copy[3] = cost
  return copy
end

-- The same limit asked with cost 0: its status without this request.
local function unchanged(limit, keys, now)
  return (A[limit.name](keys, costing(limit.args, '0'), now))
end

--[[
  A call's arguments, argv[a + 1], argv[a + 2], ...: its mode, now, memo and
  per limit the algorithm, key count and args. The calls of a batch group
  share their arguments (below); parsing them again would give the same, so
  the last parse is kept. Algorithms only read their args, so calls may share
  them; args that read as numbers arrive as numbers (algorithms take them
  with tonumber, the rest as strings).
]]
local parsed_at, parsed
local function parse(argv, a)
  if parsed_at == a then return parsed end
  local limits, at, checks = {}, a + 7, false
  for i = 1, tonumber(argv[a + 3]) do
    local nargs = tonumber(argv[at + 3])
    local args = {}
    -- Numbers once per parse, not once per call of a batch sharing them: the
    -- algorithms read them with tonumber, which returns a number as it is.
    for j = 1, nargs do
      local v = argv[at + 3 + j]
      args[j] = tonumber(v) or v
    end
    local name, check = argv[at + 1], false
    -- '?' (byte 63) at the end: a check-only limit (header above).
    if string.byte(name, -1) == 63 then name, check, checks = string.sub(name, 1, -2), true, true end
    -- Only the algorithms this call uses get defined (decide-script.ts); an
    -- unknown name defines nothing and fails below as before.
    if A[name] == nil then define(name) end
    -- keys: this limit's keys of the call being decided, refilled call after
    -- call (the calls of a group have the same key counts): a new table per
    -- call and limit was garbage for Lua's collector.
    limits[i] = { name = name, nkeys = tonumber(argv[at + 2]), args = args, keys = {}, check = check }
    at = at + 3 + nargs
  end
  -- Runtime overrides: the view the call was built with, checked before it is decided.
  local guard
  local generation = tonumber(argv[a + 7])
  if generation then
    guard = { generation = generation, stamps = {}, wexp = {} }
    for i = 1, #limits do
      guard.stamps[i] = argv[at + 2 * i - 1]
      guard.wexp[i] = tonumber(argv[at + 2 * i]) or 0
    end
  end
  parsed_at = a
  parsed = {
    mode = argv[a + 1],
    now = tonumber(argv[a + 2]) or redis_now(),
    spent_at = tonumber(argv[a + 4]),
    memo_ttl = tonumber(argv[a + 5]),
    memo_arg = argv[a + 6],
    limits = limits,
    checks = checks,
    guard = guard,
  }
  return parsed
end

-- The outcomes and writes of the call being decided (one call at a time),
-- reused: a batch would otherwise make two garbage tables per call.
local outcomes, writes = {}, {}

-- Whether the call being decided has begun to write: until then it has only
-- read, so an error means it changed nothing (a node batch sends it again).
-- Algorithms' decisions (A.<name>) only read; their writes and refunds write.
local writing = false

--[[
  What one script call leaves behind, forgotten before the next starts: the
  clock, the last parse, the shared tables, the writing flag, and the state
  of text.lua (its remembered texts) and override-guard.lua (the generation
  read). Sent as EVALSHA the whole script runs anew per call and starts
  clean anyway; loaded as a Redis Function library (decide-script.ts), the
  definitions run once at load and this state would outlive the call. A
  variable added at the top level of any of these files is reset here.
]]
local function begin_call()
  clock, parsed_at, parsed = nil, nil, nil
  outcomes, writes, writing = {}, {}, false
  int_texts, g17_last, g17_text = {}, nil, nil
  generation = nil
end
