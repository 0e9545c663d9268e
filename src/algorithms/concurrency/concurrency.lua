--[[
  Concurrency leases: at most `limit` leases held at once per identity value.
  Mirrors model.ts (clients/core/src/algorithms/concurrency); tests hold the
  two equal. Called by the driver (../decide.lua).

  keys[1]  a sorted set of leases, score = the unix ms the lease expires at,
           member = "<identity parts>:<encoded request id>" (docs/keys.md),
           e.g. rl:v1:jobs:tenant:{acme}
  args[1]  limit: leases held at once (>= 1)
  args[2]  lease_ttl_ms: how long a lease lives unless renewed
  args[3]  cost: 0 peeks; any other cost asks for one lease
  args[4]  the request's member ('' for a peek or a call without request id)
  now      unix ms (Redis TIME, or the test clock)

  A lease is held while its score is above now. Returns:
  { allowed (1|0), retry_after_ms, remaining, reset_after_ms, 0 }, write
    remaining = limit - held; reset_after_ms = for an allowed acquisition
    its lease's expiry - now, else the last lease's expiry - now (0: none);
    retry_after_ms (denied) = until enough leases expire to free one.
    The member already held: the same lease (a retry), nothing written.
    write (an acquisition only) drops the expired leases, adds the member at
    now + lease_ttl_ms and expires the set with its last lease.
]]
A.concurrency = function(keys, args, now)
  local limit, ttl, cost, member = tonumber(args[1]), tonumber(args[2]), tonumber(args[3]), tostring(args[4])
  local key, after = keys[1], '(' .. int(now)
  local held = redis.call('ZCOUNT', key, after, '+inf')
  local reset = 0
  if held > 0 then reset = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]) - now end
  if cost == 0 then return { 1, 0, limit - held, reset, 0 }, nil end
  local mine = tonumber(redis.call('ZSCORE', key, member))
  if mine and mine > now then return { 1, 0, limit - held, mine - now, 0 }, nil end
  if held >= limit then
    -- The lease whose expiry leaves room for one more.
    local freeing = redis.call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', held - limit, 1)
    return { 0, tonumber(freeing[2]) - now, limit - held, reset, 0 }, nil
  end
  return { 1, 0, limit - held - 1, ttl, 0 }, function()
    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now))
    redis.call('ZADD', key, int(now + ttl), member)
    redis.call('PEXPIRE', key, int(math.max(ttl, reset)))
  end
end

--[[
  Refund (driver mode 'refund'): removes the member if the acquisition at
  spent_at gave it its expiry (a retry that found it held added nothing).
  Redis deletes a set left empty. Mirrors refundConcurrency.
]]
R.concurrency = function(keys, args, now, spent_at)
  local member = tostring(args[4])
  if tonumber(redis.call('ZSCORE', keys[1], member)) == spent_at + tonumber(args[2]) then redis.call('ZREM', keys[1], member) end
end

--[[
  Lease operations (driver modes 'release' and 'renew'): whether the member
  is held (1|0), and a write. Release: removes the member, held or expired
  (the set keeps its expiry; Redis deletes it once empty); nil when absent.
  Renew: a held member now expires at now + lease_ttl_ms, and the set with
  its last lease; nil when not held. Mirrors releaseLease and renewLease.
]]
L.concurrency = function(keys, args, now, op)
  local key, member = keys[1], tostring(args[4])
  local at = tonumber(redis.call('ZSCORE', key, member))
  if op == 'release' then
    if not at then return 0, nil end
    return at > now and 1 or 0, function() redis.call('ZREM', key, member) end
  end
  if not at or at <= now then return 0, nil end
  local ttl = tonumber(args[2])
  return 1, function()
    redis.call('ZADD', key, int(now + ttl), member)
    local last = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    redis.call('PEXPIRE', key, int(last - now))
  end
end
