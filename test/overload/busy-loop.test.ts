import { parsePolicies } from '@quota-service/core';
import { afterEach, describe, expect, it } from 'vitest';
import { QuotaEngine } from '../../src/engine/engine.js';
import { StoreFailurePolicy, type StoreFailureKind } from '../../src/engine/failure.js';
import { createLogger } from '../../src/logger.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { useRedisServer } from '../support/use-redis.js';

/**
 * Time this process spends busy is not a store failure: with a healthy
 * Redis, an event loop blocked for several times the store budget, before
 * the calls are sent or while their answers wait to be read, opens no
 * breaker and leaves every decision to the store. A breaker that opens after
 * a single failure makes any counted timeout visible.
 */
const redis = useRedisServer();
const policies = parsePolicies(`
policies:
  orders: { failure_mode: fail_open, limits: [{ name: orders, key_by: user, algorithm: token_bucket, capacity: 100, refill_per_second: 1 }] }
`);
const BUDGET_MS = 50;

let store: RedisStore | undefined;
let failure: StoreFailurePolicy | undefined;
afterEach(async () => {
  await failure?.close();
  await store?.close();
});

function busyFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // The event loop is held: timers, I/O and answers wait.
  }
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

function setUp(): { engine: QuotaEngine; failures: StoreFailureKind[]; opened: () => number } {
  const failures: StoreFailureKind[] = [];
  let open = 0;
  failure = new StoreFailurePolicy({
    timeoutMs: BUDGET_MS,
    breakerFailures: 1,
    halfOpenAfterMs: 60_000,
    logger: createLogger('silent'),
    events: { storeFailure: (kind) => failures.push(kind), circuitStates: (counts) => (open = Math.max(open, counts.open)) },
  });
  store = RedisStore.connect(redis().url);
  return { engine: new QuotaEngine(policies, store, { failure }), failures, opened: () => open };
}

const ask = (engine: QuotaEngine, n: number) =>
  Array.from({ length: n }, (_, i) => engine.allow({ policy: 'orders', identity: { user: `u${i}` }, cost: 1, requestId: '' }));

describe('a busy event loop beside a healthy Redis', () => {
  it('blocked after the calls were sent, while their answers wait to be read: every decision from the store, no failure counted', async () => {
    const { engine, failures, opened } = setUp();
    await store!.ready();
    const decisions = ask(engine, 200);
    // The batcher sends on the next turn; then the loop is held for four budgets.
    await nextTurn();
    busyFor(4 * BUDGET_MS);
    const sources = (await Promise.all(decisions)).map((decision) => decision.source);
    expect(new Set(sources)).toEqual(new Set(['store']));
    expect(failures).toEqual([]);
    expect(opened()).toBe(0);
  });

  it('blocked before the calls were sent (queued in this process): every decision from the store, no failure counted', async () => {
    const { engine, failures, opened } = setUp();
    await store!.ready();
    const decisions = ask(engine, 200);
    busyFor(4 * BUDGET_MS);
    const sources = (await Promise.all(decisions)).map((decision) => decision.source);
    expect(new Set(sources)).toEqual(new Set(['store']));
    expect(failures).toEqual([]);
    expect(opened()).toBe(0);
  });
});
