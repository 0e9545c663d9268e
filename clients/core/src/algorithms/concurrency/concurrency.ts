import type { Algorithm } from '../algorithm.js';
import type { MemorySpace } from '../memory-space.js';
import { type ConcurrencyParams, decideConcurrency, type LeaseOpStep, type LeaseSet, refundConcurrency, releaseLease, renewLease } from './model.js';

/**
 * Concurrency leases: at most `limit` leases held at once per identity value,
 * each a member of a sorted set scored by its expiry on the store's clock.
 * An Allow with a request id acquires one (args[4], the lease's member);
 * Release and Renew act on it (driver modes 'release' and 'renew').
 */
export const concurrency: Algorithm<ConcurrencyParams> = {
  name: 'concurrency',

  lease: {
    opInMemory(space, identityKey, params, member, op, nowMs) {
      const leases = space.get<LeaseSet>(identityKey, nowMs);
      const step: LeaseOpStep = op === 'release' ? releaseLease(leases, member, nowMs) : renewLease(leases, params, member, nowMs);
      const write = step.write;
      if (write === undefined) return { held: step.held, expired: 0 };
      return { held: step.held, commit: () => writeSet(space, identityKey, write.leases, write.ttlMs, nowMs), expired: step.expired };
    },
    ttlMs: (params) => params.leaseTtlMs,
  },

  scriptKeys: (identityKey) => [identityKey],

  // The member last: a peek or a check without a request id sends ''.
  scriptArgs: (params, cost, lease) => [String(params.limit), String(params.leaseTtlMs), String(cost), lease ?? ''],

  decideInMemory(space, identityKey, params, cost, nowMs, lease) {
    const step = decideConcurrency(space.get<LeaseSet>(identityKey, nowMs), params, cost, lease ?? '', nowMs);
    const write = step.write;
    if (write === undefined) return { outcome: step.outcome };
    return { outcome: step.outcome, commit: () => writeSet(space, identityKey, write.leases, write.ttlMs, nowMs) };
  },

  refundInMemory(space, identityKey, params, _cost, nowMs, spentAtMs, lease) {
    const leases = space.get<LeaseSet>(identityKey, nowMs);
    if (leases === undefined || lease === undefined) return;
    writeSet(space, identityKey, refundConcurrency(leases, params, lease, spentAtMs), undefined, nowMs);
  },

  capacity: (params) => params.limit,

  // Whole leases: round down so N instances never hold more than the global limit.
  scaleParams: (params, share) => ({ limit: Math.floor(params.limit * share), leaseTtlMs: params.leaseTtlMs }),

  // A lease counts one whatever the Allow's cost: every cost can be granted.
  rejectCost: () => undefined,
};

/** Like ZADD/ZREM on a sorted set: `ttlMs` set anew (PEXPIRE) or kept (undefined); an empty set is deleted. */
function writeSet(space: MemorySpace, key: string, leases: Map<string, number> | undefined, ttlMs: number | undefined, nowMs: number): void {
  if (leases === undefined) space.delete(key);
  else if (ttlMs === undefined) space.update(key, leases);
  else space.set(key, leases, ttlMs, nowMs);
}
