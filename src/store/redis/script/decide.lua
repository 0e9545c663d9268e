--[[
  Driver: decides every limit of a request in one atomic step, then writes all
  or none. decide-script.ts assembles the script as
  `local A, R, C, L = {}, {}, {}, {}`, then `local function define(name)` holding
  each algorithm's .lua in a branch of its own (each defines A.<name>, its
  decision, R.<name>, its refund, and C.<name>, its charge; a lease algorithm
  also L.<name>, its release and renew), then the driver: driver-state.lua
  (clock, argument parsing, shared tables), settle.lua (mode 'settle'), this
  file (one call's decision) and entry.lua (one call or a batch). A limit's
  algorithm is defined when the call first names it.

  KEYS     the keys of every limit, in order: limit i takes the next nkeys_i
  ARGV[1]  mode:
           'spend'  write when every limit allows; a denying limit may still
                    store its refill, which never spends
           'peek'   write nothing
           'check'  as 'spend' when some limit denies: never spends (a later
                    group of a cross-slot request after an earlier one denied)
           'refund' give back what a 'spend' of the same calls at ARGV[4] took
                    (an earlier group of a cross-slot request a later group
                    rejected), then report every limit as a peek would.
                    With a memo key (ARGV[5]), as 'charge' too: only when
                    that key is absent, then set it to '1' for ARGV[5] ms
                    (a settlement's later slot group, applied once however
                    often it is sent); present, nothing is written
           'release', 'renew'  act on the lease each lease limit (L.<name>,
                    concurrency) names in its args: a release removes it, a
                    renew extends it when every lease limit of the call holds
                    it; then every limit is reported as a peek would, with
                    allowed = whether the lease was held (1 for the others)
                    and, for a lease limit whose write ran, delay_ms = minus
                    the expired leases that write dropped
           'charge' spend each limit's cost without checking (work that must
                    be paid for even over the limit): the balance may go into
                    debt, at most one capacity deep (C.<name>); then report
                    every limit as a peek would
           'settle' settle the reservation remembered at the memo key (below):
                    ARGV[6] is the actual cost, ARGV[4] the place (1-based,
                    among the request's limits) of this call's first limit in
                    the memo, whose spend time is this call's. Unsettled: each
                    limit gets back estimate - actual as 'refund' would, or is
                    charged actual - estimate as 'charge' would, and the memo
                    is marked settled (its expiry kept), all in this call.
                    Reply { 'settle', status [, estimate, actual, count,
                    spent_at x count, then a decision reply as 'refund' gives
                    it] }, every element text; status 'unknown' (no memo),
                    'pending' (a cross-slot decision not stored yet), 'denied'
                    (the Allow was denied), 'settled' (settled before: its
                    actual, nothing written) or 'applied' (settled now)
  ARGV[2]  now, unix ms; '' in production, where the clock is Redis TIME (only
           tests send it, to run on virtual time)
  ARGV[3]  the number of limits
  ARGV[4]  'refund' only: the `now` the spend ran at (its reply's last element)
  ARGV[5]  idempotent Allow: how long (ms) to remember the decision, '' for
           none; then the LAST key is the remembered decision's key
           (docs/keys.md). 'spend': a decision found there is answered again
           (reply { 'replay', <stored fields> }) and nothing is spent; else
           the new reply is stored there, followed by the reservation
           fields: the cost (args[3] of the first limit), the time each
           limit spent at (now, once per limit), and '-' (unsettled; a
           settlement puts its actual cost there). With ARGV[6] = 'claim',
           the word 'pending' is stored instead: a cross-slot decision stores
           the whole record later. 'remember': stores ARGV[6] there ('' deletes
           it); no limits. 'settle': the reservation to settle. 'refund',
           'charge': the key that makes the adjustment happen once (above).
  ARGV[6]  see ARGV[5]
  ARGV[7]  runtime overrides: the generation this replica applies, '' for no
           check. Then the call's keys end (after the memo key, if any) with
           the slot's generation key and each limit's exact override key, and
           its ARGV with two arguments per limit: the stamp of the exact
           override applied ('' for none) and the expiry of the prefix override
           applied (0 for none); override-guard.lua checks them first and
           raises QUOTA_OVERRIDES_STALE when they are not current
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
    2        'remembered', 'replay' and the remembered fields, or a
             settlement's reply (mode 'settle'), joined by one space: a
             4-byte length, then the text
    3        its error: a 4-byte length, then the error's text
  The service knows each group's n (ARGV[3]), so a record needs no count of
  its own (src/store/redis/script/decide-batch.ts).

  Node batch (a Redis Cluster master, docs/decide-script.md): ARGV[1] =
  'node-batch', ARGV[2] = the number of keys K, ARGV[3 .. K + 2] every
  call's keys (as KEYS above), then ARGV[K + 3] = the number of groups and
  the groups as above; no KEYS. Redis 7.0 refuses declared keys of several
  slots (CROSSSLOT) even with allow-cross-slot-keys, which only lets a script
  reach keys it did not declare, on its own node. The script is sent with a
  `#!lua flags=allow-cross-slot-keys` line (decide-script.ts). Redis checks
  each command against the node's slots: a key this node does not serve now
  (its slot moved, or is migrating and the key is gone, or the cluster is
  down) raises an error. A call that fails before it wrote anything (but not
  with QUOTA_OVERRIDES_STALE, which is kind 3 as elsewhere) answers one more
  kind, and the service sends it again alone, by its slot:
    4        not run here: a 4-byte length, then the error's text
  A call's first write comes after all its reads (a decision reads, then
  writes), except for 'refund' and 'remember', which first ask with one
  EXISTS of all their keys (they share a slot).

  Reply: { all_allowed (1|0), then per limit:
           allowed (1|0), retry_after_ms, remaining, reset_after_ms, delay_ms,
           then now }
    remaining is a string ("%.17g"): Redis truncates Lua numbers in replies.
    delay_ms below 0 (a lease limit, concurrency): not a delay but minus the
    leases that expired without a release and this call dropped from the set.
    A limit that allowed a request some other limit denied reports its status
    unchanged (as a peek), not what it would have had after spending.
]]

--[[
  One call, as documented above: its KEYS are keys[k + 1], keys[k + 2], ...
  and its ARGV argv[a + 1], argv[a + 2], ... (offsets, so a batch needs no
  copies). Writes its reply to reply[1 .. m] and returns m: a batch reuses
  one table for every call's reply. The single path is
  decide(KEYS, ARGV, 0, 0, reply) with a reply table of its own. Each
  limit's remaining is left a number: the single path writes it as text,
  the batch packs it as a double, both exact.
]]
--[[
  A retry (same request id) of an allowed decision, answered with its leases
  as held now: the lease limits are spent again, alone and all or nothing, so
  a lease still held is found held (its time left, nothing written) and one
  released or expired is acquired again when the set has room; else the
  retry is denied by the concurrency limit. The other limits keep their
  remembered fields. Rewrites the lease limits' fields of the replay's
  reply (reply[1] = 'replay', then the remembered fields). Mirrors
  leasesHeldNow (decide-in-memory.ts).
]]
local function leases_held_now(keys, k, limits, n, call, now, reply)
  local at, found, all = {}, {}, 1
  local j = 0
  for i = 1, n do
    local limit = limits[i]
    if limit.name == 'concurrency' and not limit.check then
      j = j + 1
      at[j] = i
      found[j], writes[j] = A.concurrency(limit.keys, limit.args, now)
      if found[j][1] == 0 then all = 0 end
    end
  end
  if j == 0 then return end
  if call.guard then check_overrides(keys, k + 1, n, call.guard, now) end
  writing = true
  for x = 1, j do
    local limit, o = limits[at[x]], found[x]
    if writes[x] and (all == 1 or o[1] == 0) then writes[x](limit.keys, limit.args, now, o) end
    if all == 0 and o[1] == 1 then o = unchanged(limit, limit.keys, now) end
    local f = 5 * at[x] - 2
    for y = 1, 5 do reply[f + y - 1] = g17(o[y]) end
  end
  if all == 0 then reply[2] = '0' end
end

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
  if mode == 'settle' then return settle(call, limits, n, memo, now, reply) end
  if memo and mode == 'spend' then
    local seen = redis.call('GET', memo)
    if seen then
      reply[1] = 'replay'
      local m = 1
      for field in string.gmatch(seen, '%S+') do
        m = m + 1
        reply[m] = field
      end
      -- A call that holds every limit of the decision (its fields: 6 per limit + 4).
      if reply[2] == '1' and m - 5 == 6 * n then leases_held_now(keys, k, limits, n, call, now, reply) end
      return m
    end
  end
  -- Its keys follow the memo key: raises before anything is written when stale.
  if call.guard then check_overrides(keys, memo and k + 1 or k, n, call.guard, now) end

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
  if mode == 'release' or mode == 'renew' then
    -- Lease operations: each lease limit's L.<name> reads first, then a
    -- release writes what it found, a renew only when every lease limit of
    -- the call holds the lease. allowed = held (1 for the other limits).
    -- A lease limit's third value: the expired leases its write drops,
    -- reported as minus that in the fifth field (0 when not written).
    local held, expired = {}, {}
    for i = 1, n do
      local limit = limits[i]
      held[i], writes[i], expired[i] = 1, nil, 0
      if L[limit.name] then held[i], writes[i], expired[i] = L[limit.name](limit.keys, limit.args, now, mode) end
      if held[i] == 0 then all = 0 end
    end
    writing = true
    local writes_run = mode == 'release' or all == 1
    if writes_run then
      for i = 1, n do
        if writes[i] then writes[i]() end
      end
    end
    for i = 1, n do
      outcomes[i] = unchanged(limits[i], limits[i].keys, now)
      outcomes[i][1] = held[i]
      if writes_run and writes[i] and expired[i] > 0 then outcomes[i][5] = -expired[i] end
    end
  elseif mode == 'refund' or mode == 'charge' then
    -- With a memo key (a settlement's later slot group): once per key.
    local done = memo and redis.call('EXISTS', memo) == 1
    writing = true
    for i = 1, done and 0 or n do
      local limit = limits[i]
      if not limit.check then
        if mode == 'refund' then
          R[limit.name](limit.keys, limit.args, now, call.spent_at)
        elseif C[limit.name] then
          C[limit.name](limit.keys, limit.args, now)
        end
      end
    end
    if memo and not done then redis.call('SET', memo, '1', 'PX', int(memo_ttl)) end
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
      -- The reservation (mode 'settle'): its cost, each limit's spend time, unsettled.
      fields[m + 1] = g17(tonumber(limits[1].args[3]))
      for i = 1, n do fields[m + 1 + i] = int(now) end
      fields[m + n + 2] = '-'
      stored = table.concat(fields, ' ')
    end
    redis.call('SET', memo, stored, 'PX', int(memo_ttl))
  end
  return m
end
