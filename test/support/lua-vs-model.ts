import fc from 'fast-check';
import { expect } from 'vitest';
import { identityKey, type Limit } from '@quota-service/core';
import type { StoreFixture } from './store-fixtures.js';
import { decideAll, decideLimit } from './store-calls.js';

/**
 * Shared by the per-algorithm "Lua equals model" properties: the driver
 * script on a real Redis (time injected) and the TypeScript model (virtual
 * clock) see the same random sequence of time steps, costs and identities and
 * must give identical outcomes (decision, retry, remaining to the last bit,
 * reset, delay), for a spend and for a peek before it.
 */
export const timeStep = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 5_000 }), fc.integer({ min: 0, max: 7_200_000 }));
export const identity = fc.constantFrom('42', '43', 'a:b', '{x}');
/** Any unix ms up to 2100. */
export const startTime = fc.integer({ min: 0, max: 4_102_444_800_000 });

export interface Step {
  step: number;
  cost: number;
  who: string;
}

/**
 * Redis expires keys on its own (real) clock while the scripts run on virtual
 * time, so sequences stay clear of TTLs short enough to lapse in real time
 * between two steps: virtual time never sits in the last 100 ms of a second
 * (every window unit is whole seconds), and generators keep other TTLs at
 * 200 ms or more.
 */
export function clearOfRealExpiry(now: number): number {
  return now % 1_000 > 900 ? now - (now % 1_000) + 1_000 : now;
}

/**
 * With `retryHolds`, every denial's retry_after_ms must mean what it says, on
 * both stores: the same request (peeked, so nothing changes) passes at
 * now + retry_after_ms and still fails 1 ms earlier.
 */
export async function runBoth(
  lua: StoreFixture,
  model: StoreFixture,
  limit: Limit,
  start: number,
  steps: Step[],
  options: { retryHolds?: boolean } = {},
): Promise<void> {
  await Promise.all([lua.reset(), model.reset()]);
  let now = clearOfRealExpiry(start);
  for (const [i, { step, cost, who }] of steps.entries()) {
    now = clearOfRealExpiry(now + step);
    lua.clock.set(now);
    model.clock.set(now);
    const call = { limit, identityKey: identityKey(limit.name, limit.keyBy, who), cost: 0 };
    const context = `step ${i}: ${JSON.stringify({ step, cost, who })}`;
    expect(await decideAll(lua.store, [call], 'peek'), `peek at ${context}`).toEqual(await decideAll(model.store, [call], 'peek'));
    const [fromLua, fromModel] = [await decideLimit(lua.store, limit, call.identityKey, cost), await decideLimit(model.store, limit, call.identityKey, cost)];
    expect(fromLua, context).toEqual(fromModel);
    if (options.retryHolds && !fromModel.allowed) {
      for (const f of [lua, model]) {
        const retry = { ...call, cost };
        f.clock.set(now + fromModel.retryAfterMs);
        expect((await decideAll(f.store, [retry], 'peek'))[0]?.allowed, `${f.name}: passes after retry_after_ms, ${context}`).toBe(true);
        f.clock.set(now + fromModel.retryAfterMs - 1);
        expect((await decideAll(f.store, [retry], 'peek'))[0]?.allowed, `${f.name}: fails 1 ms before, ${context}`).toBe(false);
        f.clock.set(now);
      }
    }
  }
}
