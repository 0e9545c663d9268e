--[[
  Driver: decides every limit of a request in one atomic step, then writes all
  or none. decide-script.ts assembles the script as
  `local A, R = {}, {}`, then `local function define(name)` holding each
  algorithm's .lua in a branch of its own (each defines A.<name>, its
  decision, and R.<name>, its refund), then this. A limit's algorithm is
  defined when the call first names it.

  KEYS     the keys of every limit, in order: limit i takes the next nkeys_i
  ARGV[1]  mode:
           'spend'  write when every limit allows; a denying limit may still
                    store its refill, which never spends
           'peek'   write nothing
           'check'  as 'spend' when some limit denies: never spends (a later
                    group of a cross-slot request after an earlier one denied)
           'refund' give back what a 'spend' of the same calls at ARGV[4] took
                    (an earlier group of a cross-slot request a later group
                    rejected), then report every limit as a peek would
  ARGV[2]  now, unix ms; '' in production, where the clock is Redis TIME (only
           tests send it, to run on virtual time)
  ARGV[3]  the number of limits
  ARGV[4]  'refund' only: the `now` the spend ran at (its reply's last element)
  ARGV[5]  idempotent Allow: how long (ms) to remember the decision, '' for
           none; then the LAST key is the remembered decision's key
           (docs/keys.md). 'spend': a decision found there is answered again
           (reply { 'replay', <stored fields> }) and nothing is spent; else
           the new reply is stored there (or, with ARGV[6] = 'claim', the
           word 'pending': a cross-slot decision stores its whole reply
           later). 'remember': stores ARGV[6] there ('' deletes it); no limits.
  ARGV[6]  see ARGV[5]
  then per limit: algorithm name, nkeys_i, nargs_i, and nargs_i arguments;
           args[3] is the cost for every algorithm (the driver sets it to '0'
           to report a limit unchanged). A name ending in '?' (e.g.
           'fixed_window?') is a check-only limit: decided at its cost with
           the others, never spent, reported as a peek would report it, and
           left alone by a refund

  Batch (docs/decide-script.md, "Batch mode"): ARGV[1] = 'batch', ARGV[2] =
  the number of groups; per group: ncalls_g, nkeys_g, nargs_g and the ARGV
  (as above, nargs_g of them) its ncalls_g calls share, each call taking its
  own nkeys_g KEYS in turn (a batch is mostly one policy at one cost, so
  mostly one group). Each call is decided by the same function, in order,
  exactly as a separate script call would be; one whose work raises an error
  answers that error in its place, and the others go on. Reply: one binary
  string, little-endian (struct.pack): per group its calls' `now` (a
  double), then per call one record, its first byte its kind:
    0 or 1   a decision: that byte is all_allowed, then per limit allowed
             (a byte) and retry_after_ms, remaining, reset_after_ms and
             delay_ms (doubles); its now is the group's
    2        'remembered', or 'replay' and the remembered fields, joined by
             one space: a 4-byte length, then the text
    3        its error: a 4-byte length, then the error's text
  The service knows each group's n (ARGV[3]), so a record needs no count of
  its own (src/algorithms/decide-batch.ts).

  Node batch (a Redis Cluster master, docs/decide-script.md): ARGV[1] =
  'node-batch', ARGV[2] = the number of keys K, ARGV[3 .. K + 2] every
  call's keys (as KEYS above), then ARGV[K + 3] = the number of groups and
  the groups as above; no KEYS. Redis 7.0 refuses declared keys of several
  slots (CROSSSLOT) even with allow-cross-slot-keys, which only lets a script
  reach keys it did not declare, on its own node. The script is sent with a
  `#!lua flags=allow-cross-slot-keys` line (decide-script.ts). Redis checks
  each command against the node's slots: a key this node does not serve now
  (its slot moved, or is migrating and the key is gone, or the cluster is
  down) raises an error. A call that fails before it wrote anything answers
  one more kind, and the service sends it again alone, by its slot:
    4        not run here: a 4-byte length, then the error's text
  A call's first write comes after all its reads (a decision reads, then
  writes), except for 'refund' and 'remember', which first ask with one
  EXISTS of all their keys (they share a slot).

  Reply: { all_allowed (1|0), then per limit:
           allowed (1|0), retry_after_ms, remaining, reset_after_ms, delay_ms,
           then now }
    remaining is a string ("%.17g"): Redis truncates Lua numbers in replies.
    A limit that allowed a request some other limit denied reports its status
    unchanged (as a peek), not what it would have had after spending.
]]

-- Redis TIME, read at most once per script call: a batch decides at one instant.
local clock
local function redis_now()
  if not clock then
    local time = redis.call('TIME')
    clock = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  end
  return clock
end

-- The same limit asked with cost 0: its status without this request.
local function unchanged(limit, keys, now)
  local args = {}
  for j, v in ipairs(limit.args) do args[j] = v end
  args[3] = '0'
  return (A[limit.name](keys, args, now))
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
  local limits, at, checks = {}, a + 6, false
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
  parsed_at = a
  parsed = {
    mode = argv[a + 1],
    now = tonumber(argv[a + 2]) or redis_now(),
    spent_at = tonumber(argv[a + 4]),
    memo_ttl = tonumber(argv[a + 5]),
    memo_arg = argv[a + 6],
    limits = limits,
    checks = checks,
  }
  return parsed
end

-- The outcomes and writes of the call being decided (one call at a time),
-- reused: a batch would otherwise make two garbage tables per call.
local outcomes, writes = {}, {}

--[[
  One call, as documented above: its KEYS are keys[k + 1], keys[k + 2], ...
  and its ARGV argv[a + 1], argv[a + 2], ... (offsets, so a batch needs no
  copies). Writes its reply to reply[1 .. m] and returns m: a batch reuses
  one table for every call's reply. The single path is
  decide(KEYS, ARGV, 0, 0, reply) with a reply table of its own. Each
  limit's remaining is left a number: the single path writes it as text,
  the batch packs it as a double, both exact.
]]
-- Whether the call being decided has begun to write: until then it has only
-- read, so an error means it changed nothing (a node batch sends it again).
-- Algorithms' decisions (A.<name>) only read; their writes and refunds write.
local writing = false

local function decide(keys, argv, k, a, reply)
  local call = parse(argv, a)
  local mode, now, memo_ttl, limits = call.mode, call.now, call.memo_ttl, call.limits
  local n = #limits
  for i = 1, n do
    local limit = limits[i]
    local these = limit.keys
    for j = 1, limit.nkeys do these[j] = keys[k + j] end
    k = k + limit.nkeys
  end
  -- The remembered decision's key follows the limits' keys (the last key of the call).
  local memo = memo_ttl and keys[k + 1]

  if mode == 'remember' then
    writing = true
    if call.memo_arg == '' then
      redis.call('DEL', memo)
    else
      redis.call('SET', memo, call.memo_arg, 'PX', int(memo_ttl))
    end
    reply[1] = 'remembered'
    return 1
  end
  if memo and mode == 'spend' then
    local seen = redis.call('GET', memo)
    if seen then
      reply[1] = 'replay'
      local m = 1
      for field in string.gmatch(seen, '%S+') do
        m = m + 1
        reply[m] = field
      end
      return m
    end
  end

  -- One limit spent without a memo, the usual call of a batch: the general
  -- path below, with what it does for n == 1 only. Its write runs when it
  -- allows (a spend) and when it denies (a refill, never a spend), and a
  -- denying limit is reported as it is.
  if n == 1 and mode == 'spend' and not memo and not limits[1].check then
    local limit = limits[1]
    local o, write = A[limit.name](limit.keys, limit.args, now)
    writing = true
    if write then write(limit.keys, limit.args, now, o) end
    reply[1], reply[2], reply[3], reply[4], reply[5], reply[6], reply[7] = o[1] == 0 and 0 or 1, o[1], o[2], o[3], o[4], o[5], now
    return 7
  end

  local all = 1
  if mode == 'refund' then
    writing = true
    for i = 1, n do
      local limit = limits[i]
      if not limit.check then R[limit.name](limit.keys, limit.args, now, call.spent_at) end
    end
    for i = 1, n do outcomes[i] = unchanged(limits[i], limits[i].keys, now) end
  else
    for i = 1, n do
      local limit = limits[i]
      local outcome, write = A[limit.name](limit.keys, limit.args, now)
      outcomes[i], writes[i] = outcome, write
      if outcome[1] == 0 then all = 0 end
    end
    local spends = mode == 'spend' and all == 1
    writing = mode ~= 'peek'
    if mode == 'spend' or mode == 'check' then
      for i = 1, n do
        if writes[i] and ((spends and not limits[i].check) or outcomes[i][1] == 0) then writes[i](limits[i].keys, limits[i].args, now, outcomes[i]) end
      end
    end
    if mode ~= 'peek' and (not spends or call.checks) then
      for i = 1, n do
        if outcomes[i][1] == 1 and (not spends or limits[i].check) then outcomes[i] = unchanged(limits[i], limits[i].keys, now) end
      end
    end
  end

  reply[1] = all
  for i = 1, n do
    local o, at = outcomes[i], 5 * i - 3
    reply[at], reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4] = o[1], o[2], o[3], o[4], o[5]
  end
  local m = 5 * n + 2
  reply[m] = now
  if memo and mode == 'spend' then
    local stored = 'pending'
    if call.memo_arg ~= 'claim' then
      local fields = {}
      for i = 1, m do
        local v = reply[i]
        fields[i] = type(v) == 'number' and g17(v) or v
      end
      stored = table.concat(fields, ' ')
    end
    redis.call('SET', memo, stored, 'PX', int(memo_ttl))
  end
  return m
end

if ARGV[1] ~= 'batch' and ARGV[1] ~= 'node-batch' then
  -- Room for a one-limit reply from the start (Lua 5.1 has no table.new):
  -- growing an empty table to 7 elements rehashes it 4 times.
  local reply = { nil, nil, nil, nil, nil, nil, nil }
  local m = decide(KEYS, ARGV, 0, 0, reply)
  if type(reply[1]) == 'number' then
    -- Each limit's remaining as text: Redis truncates a Lua number in a reply.
    for at = 4, m - 1, 5 do reply[at] = g17(reply[at]) end
  end
  return reply
end

-- Batch: every call in turn. An error in one call (a key of the wrong type,
-- say) answers that call with the error, as its own script call would have,
-- and the next call is decided; what the failed call wrote before its error
-- stays written, as in a separate script call.
-- The reply is one binary string (docs/decide-script.md, "Batch mode"): an
-- array of numbers cost the service's RESP decoder (ioredis 6) about 1 µs
-- per decision and Redis about 0.3 µs to convert from Lua, where struct.pack
-- costs Redis less and the service reads a double in nanoseconds. (A nested
-- table per call, or a decision as decimal text, cost more still.) `reply`
-- takes each call's reply in turn: a table per call was garbage.
local pack = struct.pack
local DECISION_ONE, LIMIT, NOW, TEXT = '<BBdddd', '<Bdddd', '<d', '<BI4'
local KIND_TEXT, KIND_ERROR, KIND_ELSEWHERE = 2, 3, 4
local replies, reply, r = {}, {}, 0
-- keys: KEYS from k + 1 on; groups: ARGV from a + 1 on, after their count at ARGV[a].
local keys, k, a = KEYS, 0, 2
local node_batch = ARGV[1] == 'node-batch'
if node_batch then
  keys, a = ARGV, tonumber(ARGV[2]) + 3
  k = 2
end
for _ = 1, tonumber(ARGV[a]) do
  local ncalls, nkeys, nargs = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  -- The calls of a group share their ARGV, so their `now` (parse): sent once,
  -- first, instead of with every call's reply.
  r = r + 1
  replies[r] = pack(NOW, tonumber(ARGV[a + 5]) or redis_now())
  -- A node batch: a refund or a remember writes from its first command on,
  -- so it first asks whether this node serves every key of the call now (one
  -- EXISTS; all its keys share a slot). The other modes read first.
  local mode = ARGV[a + 4]
  local probe = node_batch and mode ~= 'spend' and mode ~= 'peek' and mode ~= 'check'
  for _ = 1, ncalls do
    local ok, m = true, 0
    writing = false
    local elsewhere = probe and redis.pcall('EXISTS', unpack(keys, k + 1, k + nkeys))
    if type(elsewhere) == 'table' then
      ok, m = false, elsewhere
    else
      ok, m = pcall(decide, keys, ARGV, k, a + 3, reply)
    end
    r = r + 1
    if not ok and node_batch and not writing then
      -- It failed before writing anything (its node does not serve its keys
      -- now, typically): not run, the service sends it again where it belongs.
      local text = type(m) == 'table' and m.err or tostring(m)
      replies[r] = pack(TEXT, KIND_ELSEWHERE, #text) .. text
    elseif not ok then
      -- redis.call raises the reply's error text (a table), Lua its own message.
      local text = type(m) == 'table' and m.err or tostring(m)
      replies[r] = pack(TEXT, KIND_ERROR, #text) .. text
    elseif type(reply[1]) == 'number' then
      -- A decision: all_allowed (0 or 1, also its kind), then per limit its
      -- five fields; not its last element, now.
      if m == 7 then
        replies[r] = pack(DECISION_ONE, reply[1], reply[2], reply[3], reply[4], reply[5], reply[6])
      else
        local parts = { string.char(reply[1]) }
        for at = 2, m - 1, 5 do
          parts[#parts + 1] = pack(LIMIT, reply[at], reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4])
        end
        replies[r] = table.concat(parts)
      end
    else
      -- 'remembered', or 'replay' and the remembered fields: one text.
      local text = table.concat(reply, ' ', 1, m)
      replies[r] = pack(TEXT, KIND_TEXT, #text) .. text
    end
    k = k + nkeys
  end
  a = a + 3 + nargs
end
return table.concat(replies)
