import { expect } from 'vitest';
import { identityKey, type Limit } from '@quota-service/core';
import type { StoreFixture } from './store-fixtures.js';
import { decideLimit } from './store-calls.js';

/** One decision of a sequence: advance virtual time by `step` ms, spend a share of the capacity as `who`. */
export type Step = { step: number; share: number; who: string };

/** Keeps virtual time out of the last 5 s of a minute, so Redis's real-time expiry never lapses mid-sequence. */
function clearOfRealExpiry(now: number): number {
  return now % 60_000 > 55_000 ? now - (now % 60_000) + 60_000 : now;
}

/** Whole costs from 1 up to the limit's capacity: valid for every algorithm. */
function costOf(limit: Limit, share: number): number {
  return share < 0.4 ? 1 : Math.max(1, Math.floor(share * limit.algorithm.capacity(limit.params)));
}

/** Runs one sequence on every fixture in lock step; `during` may disturb the stores before a step. */
export async function runInLockStep(
  fixtures: readonly StoreFixture[],
  limit: Limit,
  start: number,
  steps: readonly Step[],
  during: (index: number) => Promise<void> = async () => {},
): Promise<void> {
  await Promise.all(fixtures.map((f) => f.reset()));
  let now = clearOfRealExpiry(start);
  for (const [i, { step: dt, share, who }] of steps.entries()) {
    await during(i);
    now = clearOfRealExpiry(now + dt);
    for (const f of fixtures) f.clock.set(now);
    const key = identityKey(limit.name, limit.keyBy, who);
    const cost = costOf(limit, share);
    const [model, ...others] = await Promise.all(fixtures.map((f) => decideLimit(f.store, limit, key, cost)));
    others.forEach((outcome, j) => {
      expect(outcome, `step ${i} on ${fixtures[j + 1]!.name}: ${JSON.stringify({ dt, cost, who })}`).toEqual(model);
    });
  }
}
