import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identityKey, type Limit, type SliceAnswer, type SliceOp } from '@quota-service/core';
import { clearOfRealExpiry, startTime } from '../support/lua-vs-model.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { limitFrom, memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { decideAll } from '../support/store-calls.js';
import { decideOne, type QuotaStore } from '../../src/store/store.js';

/**
 * Slices, Lua = model: the slice script on a real Redis (time injected) and
 * sliceInMemory on the embedded store see the same random sequence of time
 * steps, ordinary spends, takes and give-backs by three holders, and must
 * give the same answers (taken, valid, remaining to the last bit, returned)
 * and leave the limit in the same state (a peek after every step).
 */
let server: RedisServer;
let lua: StoreFixture;
let model: StoreFixture;
beforeAll(async () => {
  server = await startRedisServer();
  lua = redisFixture(server);
  model = memoryFixture();
});
afterAll(async () => {
  await server?.stop();
});

/** What the random sequences did, so a property that never took or gave back a unit fails. */
const seen = { taken: 0, returned: 0 };

type Action = { step: number; kind: 'spend' | SliceOp; holder: string; amount: number };

/** Time steps: none, a little, about a slice's life, past a window. */
const sliceTimeStep = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 3_000 }), fc.integer({ min: 0, max: 120_000 }));
const action = (maxCost: number) =>
  fc.record({
    step: sliceTimeStep,
    kind: fc.constantFrom<Action['kind']>('spend', 'spend', 'take', 'take', 'give-back'),
    holder: fc.constantFrom('h1', 'h2', 'pod-3:1234'),
    // A spend's cost, or the units a holder gives back (at times more than it holds).
    amount: fc.oneof(
      { arbitrary: fc.integer({ min: 0, max: Math.max(1, Math.floor(maxCost)) }), weight: 3 },
      { arbitrary: fc.double({ min: 0, max: maxCost, noNaN: true }), weight: 1 },
    ),
  });
/** ttl_ms of 1 s or more: the records' keys expire on Redis's real clock at twice that. */
const slices = fc.record({
  share: fc.oneof(fc.constantFrom(0.05, 0.5, 1), fc.double({ min: 0.001, max: 1, noNaN: true })),
  max_units: fc.integer({ min: 1, max: 200 }),
  ttl_ms: fc.integer({ min: 1_000, max: 60_000 }),
});

function slice(store: QuotaStore, limit: Limit, key: string, holder: string, op: SliceOp, giveBack: number): Promise<SliceAnswer | undefined> {
  return decideOne(store, { mode: 'slice', calls: [{ limit, identityKey: key, cost: 0 }], holder, op, giveBack }).then((decision) => decision.slice);
}

async function runBoth(limit: Limit, start: number, actions: Action[]): Promise<void> {
  await Promise.all([lua.reset(), model.reset()]);
  const key = identityKey(limit.name, limit.keyBy, 'acme');
  const call = { limit, identityKey: key, cost: 0 };
  let now = clearOfRealExpiry(start);
  for (const [i, { step, kind, holder, amount }] of actions.entries()) {
    now = clearOfRealExpiry(now + step);
    lua.clock.set(now);
    model.clock.set(now);
    const context = `step ${i}: ${JSON.stringify({ step, kind, holder, amount })}`;
    if (kind === 'spend') {
      const cost = limit.algorithm.name === 'fixed_window' ? Math.floor(amount) : amount;
      const spent = await Promise.all([lua, model].map((f) => decideAll(f.store, [{ ...call, cost }], 'spend')));
      expect(spent[0], context).toEqual(spent[1]);
    } else {
      const [fromLua, fromModel] = await Promise.all([lua, model].map((f) => slice(f.store, limit, key, holder, kind, amount)));
      expect(fromLua, context).toEqual(fromModel);
      if (fromModel!.taken > 0) seen.taken++;
      if (fromModel!.returned > 0) seen.returned++;
      const options = limit.slices!;
      expect(fromModel!.taken, context).toBeLessThanOrEqual(options.maxUnits);
      expect(fromModel!.validMs, context).toBeLessThanOrEqual(options.ttlMs);
    }
    const peeks = await Promise.all([lua, model].map((f) => decideAll(f.store, [call], 'peek')));
    expect(peeks[0], `peek after ${context}`).toEqual(peeks[1]);
  }
}

function expectSlicesExercised(): void {
  expect(seen.taken, 'takes that took units').toBeGreaterThan(5);
  expect(seen.returned, 'give-backs that gave units back').toBeGreaterThan(5);
  seen.taken = 0;
  seen.returned = 0;
}

describe('slices: Lua equals model', () => {
  it('token bucket: takes, give-backs and spends under random time steps and costs', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 500 }),
        fc.oneof(fc.constantFrom(0.5, 1, 10), fc.double({ min: 0.5, max: 50, noNaN: true })),
        slices,
        startTime,
        fc.array(action(50), { minLength: 1, maxLength: 30 }),
        async (capacity, anyRate, sliceOptions, start, actions) => {
          // rate <= 10 x capacity keeps the bucket's TTL (capacity * 2000 / rate) at 200 ms or more.
          const rate = Math.min(anyRate, 10 * capacity);
          const limit = limitFrom({ name: 'tb', key_by: 'tenant', algorithm: 'token_bucket', capacity, refill_per_second: rate, slices: sliceOptions });
          await runBoth(
            limit,
            start,
            actions.map((a) => (a.kind === 'spend' ? { ...a, amount: Math.min(a.amount, capacity) } : a)),
          );
        },
      ),
      { numRuns: 100 },
    );
    expectSlicesExercised();
  });

  it('GCRA: takes, give-backs and spends under random time steps and costs', async () => {
    // Redis expires the theoretical arrival time on its real clock at tat - now, which a
    // give-back can bring close to now: whole units, whole seconds and an interval of
    // 200 ms or more keep every tat at least 200 ms ahead, clear of real expiry.
    const wholeSeconds = (a: Action): Action => ({ ...a, step: a.step - (a.step % 1_000), amount: Math.floor(a.amount) });
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 500 }),
        fc.constantFrom(1, 2, 4, 5),
        slices,
        startTime.map((t) => t - (t % 1_000)),
        fc.array(action(50).map(wholeSeconds), { minLength: 1, maxLength: 30 }),
        async (capacity, rate, sliceOptions, start, actions) => {
          const limit = limitFrom({ name: 'gc', key_by: 'tenant', algorithm: 'gcra', capacity, refill_per_second: rate, slices: sliceOptions });
          await runBoth(
            limit,
            start,
            actions.map((a) => (a.kind === 'spend' ? { ...a, amount: Math.min(a.amount, capacity) } : a)),
          );
        },
      ),
      { numRuns: 100 },
    );
    expectSlicesExercised();
  });

  it('fixed window: takes, give-backs and spends under random time steps and costs, across windows', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('second', 'minute', '10s'),
        fc.integer({ min: 1, max: 500 }),
        slices,
        startTime,
        fc.array(action(50), { minLength: 1, maxLength: 30 }),
        async (window, max, sliceOptions, start, actions) => {
          const limit = limitFrom({ name: 'fw', key_by: 'tenant', algorithm: 'fixed_window', limit: max, window, slices: sliceOptions });
          await runBoth(
            limit,
            start,
            actions.map((a) => (a.kind === 'spend' ? { ...a, amount: Math.min(a.amount, max) } : a)),
          );
        },
      ),
      { numRuns: 100 },
    );
    expectSlicesExercised();
  });
});
