import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { type AllowInput, type Decision, parsePolicies, StoreUnavailableError, VirtualClock } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { createLogger } from '../../src/logger.js';
import { StoreFailurePolicy, type StoreFailureKind } from '../../src/engine/failure.js';
import { MemoryStore } from '../../src/store/memory.js';
import type { QuotaStore } from '../../src/store/store.js';
import { HangingStore } from '../support/hanging-store.js';
import { memoryFixture, redisFixture, T0, type StoreFixture } from '../support/store-fixtures.js';
import { useRedisServer } from '../support/use-redis.js';

/**
 * QuotaEngine.allowEach (an AllowBatch's or AllowStream message's requests,
 * decided together) answers exactly what allow() per request answers when the
 * requests are issued in the same order in one synchronous run, as the
 * service did before allowEach: the same results and errors, and the same
 * state left in the store (a second store of the same kind runs allow()).
 * Also under a store that fails or hangs: the same failure-mode decisions,
 * the same failures counted, the breaker in the same state.
 */
const policies = parsePolicies(
  stringify({
    policies: {
      bucket: { limits: [{ name: 'bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 3, refill_per_second: 1 }] },
      both: {
        limits: [
          { name: 'bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 3, refill_per_second: 1 },
          { name: 'tenant', key_by: 'tenant', algorithm: 'fixed_window', limit: 4, window: 'minute' },
        ],
      },
      shaped: { limits: [{ name: 'shaped', key_by: 'user', algorithm: 'leaky_bucket', capacity: 3, leak_per_second: 1, mode: 'shaping' }] },
      open: { failure_mode: 'fail_open', limits: [{ name: 'open', key_by: 'user', algorithm: 'token_bucket', capacity: 2, refill_per_second: 1 }] },
      closed: { failure_mode: 'fail_closed', limits: [{ name: 'closed', key_by: 'user', algorithm: 'token_bucket', capacity: 2, refill_per_second: 1 }] },
      local: { failure_mode: 'local', local_share: 0.5, limits: [{ name: 'local', key_by: 'user', algorithm: 'fixed_window', limit: 4, window: 'minute' }] },
    },
  }),
);

/** Requests from few identities, so they meet on the same keys; some with a request id (decided on their own), some invalid. */
const input: fc.Arbitrary<AllowInput> = fc.record({
  policy: fc.constantFrom('bucket', 'bucket', 'both', 'shaped', 'open', 'closed', 'local', 'unknown'),
  identity: fc.record({ user: fc.constantFrom('a', 'b'), tenant: fc.constantFrom('t1', 't2') }),
  cost: fc.constantFrom(1, 1, 2, 0, -1),
  requestId: fc.constantFrom('', '', '', 'r1', 'r2'),
});
// Virtual time moves in whole seconds and every rate is 1/s, so any TTL a script
// sets is a second or more of real time: no key lapses on Redis's own clock
// while a run compares the two stores.
const steps = fc.array(fc.record({ batch: fc.array(input, { minLength: 1, maxLength: 8 }), advanceMs: fc.constantFrom(0, 0, 1_000, 2_000) }), {
  minLength: 1,
  maxLength: 6,
});

type Settled = PromiseSettledResult<Decision>;
/** A result as compared: the decision, or the error's class and message. */
const comparable = (result: Settled) =>
  result.status === 'fulfilled' ? result.value : { error: `${(result.reason as Error).name}: ${(result.reason as Error).message}` };

const oneByOne = (engine: QuotaEngine, batch: readonly AllowInput[]) => Promise.allSettled(batch.map((request) => engine.allow(request)));
const together = (engine: QuotaEngine, batch: readonly AllowInput[]) => engine.allowEach(batch, (decision) => decision);

/** Every key's DUMP and TTL (ms). */
async function redisState(redis: Redis): Promise<Map<string, { dump: string; ttl: number }>> {
  const state = new Map<string, { dump: string; ttl: number }>();
  for (const key of (await redis.keys('*')).sort())
    state.set(key, { dump: ((await redis.dumpBuffer(key)) as Buffer).toString('hex'), ttl: await redis.pttl(key) });
  return state;
}

/** The same keys with the same bytes; TTLs within a second of each other, as Redis counts them down in real time between the two runs and reads. */
function expectSameRedisState(a: Map<string, { dump: string; ttl: number }>, b: Map<string, { dump: string; ttl: number }>): void {
  expect([...a.keys()]).toEqual([...b.keys()]);
  for (const [key, { dump, ttl }] of a) {
    const other = b.get(key)!;
    expect(dump, key).toBe(other.dump);
    expect(Math.abs(ttl - other.ttl), `${key} ttl ${ttl} vs ${other.ttl}`).toBeLessThanOrEqual(1_000);
  }
}

function memoryState(fixture: StoreFixture): Record<string, unknown> {
  const store = fixture.store as MemoryStore;
  const now = fixture.clock.now();
  return Object.fromEntries(
    store.space
      .keys(now)
      .sort()
      .map((key) => [key, { value: store.space.get(key, now), ttl: store.space.ttl(key, now) }]),
  );
}

describe('allowEach answers what allow() per request answers, issued in the same order', () => {
  const first = useRedisServer();
  const second = useRedisServer();

  it.each(['memory', 'redis'] as const)('%s: results, errors and stored state, over random batches', async (kind) => {
    const a = kind === 'memory' ? memoryFixture() : redisFixture(first());
    const b = kind === 'memory' ? memoryFixture() : redisFixture(second());
    const inspect = kind === 'memory' ? undefined : [first().client(), second().client()];
    await fc.assert(
      fc.asyncProperty(steps, async (plan) => {
        await a.reset();
        await b.reset();
        const engineA = new QuotaEngine(policies, a.store);
        const engineB = new QuotaEngine(policies, b.store);
        for (const { batch, advanceMs } of plan) {
          a.clock.advance(advanceMs);
          b.clock.advance(advanceMs);
          const [got, expected] = await Promise.all([together(engineA, batch), oneByOne(engineB, batch)]);
          expect(got.map(comparable)).toEqual(expected.map(comparable));
        }
        if (kind === 'memory') expect(memoryState(a)).toEqual(memoryState(b));
        else expectSameRedisState(await redisState(inspect![0]!), await redisState(inspect![1]!));
      }),
      { numRuns: kind === 'memory' ? 150 : 40 },
    );
  });
});

/** A store that answers every question with StoreUnavailableError, as Redis does when unreachable. */
/**
 * A store whose calls of one turn fail with one error, as the calls Redis
 * gets in one script call per turn do: one failure for the breaker, however
 * many requests it failed.
 */
class DownStore extends MemoryStore {
  private failure: StoreUnavailableError | undefined;

  override decide(): Promise<never> {
    return Promise.reject(this.turnFailure());
  }

  private turnFailure(): StoreUnavailableError {
    if (this.failure === undefined) {
      this.failure = new StoreUnavailableError(new Error('down'));
      queueMicrotask(() => (this.failure = undefined));
    }
    return this.failure;
  }
}

function failingEngine(store: QuotaStore, timeoutMs = 1_000) {
  const failures: StoreFailureKind[] = [];
  const failure = new StoreFailurePolicy({
    timeoutMs,
    breakerFailures: 3,
    halfOpenAfterMs: 60_000,
    logger: createLogger('silent'),
    events: { storeFailure: (kind) => failures.push(kind), circuitStates: () => {} },
    // The local limiter on virtual time: both engines' local decisions at the same instant.
    clock: new VirtualClock(T0),
  });
  return { engine: new QuotaEngine(policies, store, { failure }), failures, failure };
}

describe('allowEach with a store that cannot answer: what allow() per request does', () => {
  const batch: AllowInput[] = ['open', 'closed', 'local', 'bucket', 'local'].map((policy) => ({
    policy,
    identity: { user: 'a', tenant: 't1' },
    cost: 1,
    requestId: '',
  }));
  const stores: Array<[string, () => QuotaStore, number]> = [
    ['a store that fails', () => new DownStore(), 1_000],
    ['a store that never answers (deadline 50 ms)', () => new HangingStore(), 50],
  ];
  const opened: QuotaStore[] = [];
  afterAll(async () => {
    for (const store of opened) await store.close();
  });

  it.each(stores)('%s: the same decisions, failures counted and breaker state, batch after batch', async (_name, makeStore, timeoutMs) => {
    const a = failingEngine(makeStore(), timeoutMs);
    const b = failingEngine(makeStore(), timeoutMs);
    // One failure per batch (one store call, one deadline): the third batch opens the breaker (3 in a row), the fourth meets it open.
    for (let round = 0; round < 4; round++) {
      const [got, expected] = await Promise.all([together(a.engine, batch), oneByOne(b.engine, batch)]);
      expect(got.map(comparable)).toEqual(expected.map(comparable));
      expect(a.failures).toEqual(b.failures);
      expect(a.failure.circuitStates()).toEqual(b.failure.circuitStates());
    }
    expect(a.failure.circuitStates().open).toBe(1);
    expect(a.failures).toContain(timeoutMs === 50 ? 'timeout' : 'error');
    // Every request got its policy's failure mode ('bucket' has the default, fail_open).
    const sources = (await together(a.engine, batch)).map((r) => (r.status === 'fulfilled' ? r.value.source : 'error'));
    expect(sources).toEqual(['fail_open', 'fail_closed', 'local', 'fail_open', 'local']);
  });
});
