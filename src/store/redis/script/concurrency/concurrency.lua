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
  { allowed (1|0), retry_after_ms, remaining, reset_after_ms, -expired }, write
    remaining = limit - held; reset_after_ms = for an allowed acquisition
    its lease's expiry - now, else the last lease's expiry - now (0: none);
    retry_after_ms (denied) = until enough leases expire to free one.
    The member already held: the same lease (a retry), nothing written.
    An acquisition, allowed or denied, drops the leases that expired without
    a release (write): the fifth field, where other algorithms put a delay,
    is minus their number (0 when none; docs/decide-script.md). Allowed, the
    write also adds the member at now + lease_ttl_ms, and the set lives one
    lease_ttl_ms past its last lease, so an expired lease is still there for
    the next lease call of the identity to find and count.
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
  local expired = redis.call('ZCOUNT', key, '-inf', int(now))
  local dropped = expired > 0 and -expired or 0
  if held >= limit then
    -- The lease whose expiry leaves room for one more.
    local freeing = redis.call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', held - limit, 1)
    local denied = { 0, tonumber(freeing[2]) - now, limit - held, reset, dropped }
    if expired == 0 then return denied, nil end
    return denied, function() redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now)) end
  end
  return { 1, 0, limit - held - 1, ttl, dropped }, function()
    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now))
    redis.call('ZADD', key, int(now + ttl), member)
    redis.call('PEXPIRE', key, int(math.max(ttl, reset) + ttl))
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
  is held (1|0), a write, and how many leases of the set expired without a
  release (the write drops them). Release: removes the member and the
  expired leases (the set keeps its expiry; Redis deletes it once empty);
  the member counts among the expired when its lease expired before this
  release; nil when nothing is there to remove. Renew: a held member now
  expires at now + lease_ttl_ms, the expired leases go, and the set lives one
  lease_ttl_ms past its last lease; nil when not held. Mirrors releaseLease
  and renewLease.
]]
L.concurrency = function(keys, args, now, op)
  local key, member = keys[1], tostring(args[4])
  local at = tonumber(redis.call('ZSCORE', key, member))
  local held = at ~= nil and at > now
  if op == 'renew' and not held then return 0, nil, 0 end
  local expired = redis.call('ZCOUNT', key, '-inf', int(now))
  local prune = function() redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now)) end
  if op == 'release' then
    if not held and expired == 0 then return 0, nil, 0 end
    return held and 1 or 0, function()
      prune()
      if held then redis.call('ZREM', key, member) end
    end, expired
  end
  local ttl = tonumber(args[2])
  return 1, function()
    prune()
    redis.call('ZADD', key, int(now + ttl), member)
    local last = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    redis.call('PEXPIRE', key, int(last - now + ttl))
  end, expired
end
