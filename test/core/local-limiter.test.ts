import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { InvalidArgumentError, LocalLimiter, parsePolicies, PolicyNotFoundError, VirtualClock } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { MemoryStore } from '../../src/store/memory.js';
import { T0 } from '../support/store-fixtures.js';

/**
 * The core's LocalLimiter (the quota client's local fallback) decides as the
 * service's engine on its embedded store: over random sequences of requests
 * on virtual time, every answer (allowed, retryAfterMs, deniedBy, limits,
 * delayMs) and every rejection is the same, with source 'local'; a retry
 * of a lease that expired meanwhile included.
 */
const policies = parsePolicies(
  stringify({
    policies: {
      bucket: { limits: [{ name: 'bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 3, refill_per_second: 1 }] },
      layered: {
        limits: [
          { name: 'per-user', key_by: 'user', algorithm: 'gcra', capacity: 4, refill_per_second: 2 },
          { name: 'per-tenant', key_by: 'tenant', algorithm: 'fixed_window', limit: 5, window: 'second' },
          { name: 'log', key_by: 'tenant', algorithm: 'sliding_window_log', limit: 6, window: 'minute' },
        ],
      },
      shaped: { limits: [{ name: 'queue', key_by: 'user', algorithm: 'leaky_bucket', capacity: 3, leak_per_second: 2, mode: 'shaping' }] },
      counter: { limits: [{ name: 'est', key_by: 'user', algorithm: 'sliding_window_counter', limit: 4, window: 'second' }] },
      leased: {
        request_id_ttl_ms: 10_000,
        limits: [
          { name: 'in-flight', key_by: 'tenant', algorithm: 'concurrency', limit: 2, lease_ttl_ms: 2_000 },
          { name: 'leased-bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 3, refill_per_second: 1 },
        ],
      },
    },
  }),
);

const step = fc.record({
  advanceMs: fc.integer({ min: 0, max: 1500 }),
  policy: fc.constantFrom('bucket', 'layered', 'shaped', 'counter', 'leased', 'missing', ''),
  user: fc.constantFrom('u1', 'u2', 'a:b{c}'),
  tenant: fc.option(fc.constantFrom('t1', 't2'), { nil: undefined }),
  cost: fc.constantFrom(0, 1, 2, 7, -1),
  requestId: fc.option(fc.constantFrom('r1', 'r2', 'r3'), { nil: undefined }),
});

interface Step {
  advanceMs: number;
  policy: string;
  user: string;
  tenant: string | undefined;
  cost: number;
  requestId: string | undefined;
}

/** Acquisitions on the lease policy: few request ids, lease_ttl_ms 2 s, so retries often find their lease expired. */
const leaseStep = fc.record({
  advanceMs: fc.integer({ min: 0, max: 1500 }),
  policy: fc.constant('leased'),
  user: fc.constantFrom('u1', 'u2'),
  tenant: fc.constant('t1'),
  cost: fc.constant(1),
  requestId: fc.constantFrom('r1', 'r2', 'r3'),
});

type Answer = { decision: unknown } | { error: string; message: string };

function answerOf(decide: () => unknown): Answer {
  try {
    return { decision: decide() };
  } catch (error) {
    return { error: (error as Error).constructor.name, message: (error as Error).message };
  }
}

/** Every step decided by the engine on the embedded store and by the LocalLimiter, on clocks moved alike: the same answers. */
async function sameAsEngine(steps: readonly Step[]): Promise<void> {
  const engineClock = new VirtualClock(T0);
  const limiterClock = new VirtualClock(T0);
  const engine = new QuotaEngine(policies, new MemoryStore(engineClock));
  const limiter = new LocalLimiter(policies, { clock: limiterClock });
  for (const { advanceMs, policy, user, tenant, cost, requestId } of steps) {
    engineClock.advance(advanceMs);
    limiterClock.advance(advanceMs);
    const identity: Record<string, string> = tenant === undefined ? { user } : { user, tenant };
    let expected: Answer;
    try {
      const { source: _source, ...decision } = await engine.allow({ policy, identity, cost, requestId: requestId ?? '' });
      expected = { decision: { ...decision, source: 'local' } };
    } catch (error) {
      expected = { error: (error as Error).constructor.name, message: (error as Error).message };
    }
    expect(answerOf(() => limiter.allow({ policy, identity, cost, ...(requestId === undefined ? {} : { requestId }) }))).toEqual(expected);
  }
}

describe('LocalLimiter', () => {
  it('decides as the engine on the embedded store, for random sequences', async () => {
    await fc.assert(fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 60 }), sameAsEngine), { numRuns: 150 });
  });

  it('decides as the engine on the embedded store for leases, retries of expired leases included', async () => {
    await fc.assert(fc.asyncProperty(fc.array(leaseStep, { minLength: 1, maxLength: 40 }), sameAsEngine), { numRuns: 100 });
  });

  it('names the field of bad input and the unknown policy', () => {
    const limiter = new LocalLimiter(policies);
    expect(() => limiter.allow({ policy: 'layered', identity: { user: 'u1' } })).toThrow(InvalidArgumentError);
    expect(() => limiter.allow({ policy: 'layered', identity: { user: 'u1' } })).toThrow(/identity\.tenant/);
    expect(() => limiter.allow({ policy: 'nope', identity: { user: 'u1' } })).toThrow(PolicyNotFoundError);
  });

  it('a retry with the same request id gets the first decision and spends nothing', () => {
    const limiter = new LocalLimiter(policies, { clock: new VirtualClock(T0) });
    const first = limiter.allow({ policy: 'bucket', identity: { user: 'u1' }, requestId: 'order-1' });
    expect(limiter.allow({ policy: 'bucket', identity: { user: 'u1' }, requestId: 'order-1' })).toEqual(first);
    expect(limiter.allow({ policy: 'bucket', identity: { user: 'u1' } }).limits[0]?.remaining).toBe(1);
  });

  it("a retry of a lease that expired acquires it again when there is room, without spending the policy's other limits again", () => {
    const clock = new VirtualClock(T0);
    const limiter = new LocalLimiter(policies, { clock });
    const acquire = (user: string, requestId: string) => limiter.allow({ policy: 'leased', identity: { user, tenant: 't1' }, requestId });
    expect(acquire('u1', 'a')).toMatchObject({ allowed: true, leaseExpiresInMs: 2_000 });
    clock.advance(500);
    expect(acquire('u1', 'a')).toMatchObject({ allowed: true, leaseExpiresInMs: 1_500 });
    clock.advance(1_500);
    expect(acquire('u2', 'b')).toMatchObject({ allowed: true, limits: [{ leasesHeld: 1 }, {}] });
    const again = acquire('u1', 'a');
    expect(again).toMatchObject({ allowed: true, leaseExpiresInMs: 2_000, limits: [{ leasesHeld: 2 }, {}] });
    expect(acquire('u3', 'c')).toMatchObject({ allowed: false, deniedBy: 'in-flight' });
    clock.advance(2_000);
    expect(acquire('u2', 'd')).toMatchObject({ allowed: true });
    expect(acquire('u3', 'e')).toMatchObject({ allowed: true });
    const full = acquire('u1', 'a');
    expect(full).toMatchObject({ allowed: false, deniedBy: 'in-flight' });
    expect(full.leaseExpiresInMs).toBeUndefined();
  });
});
