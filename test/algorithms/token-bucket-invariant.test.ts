import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { identityKey } from '@quota-service/core';
import { limitFrom, memoryFixture } from '../support/store-fixtures.js';
import { decideLimit } from '../support/store-calls.js';

// The model is proven equal to the Lua (lua-equals-model.test.ts), so the invariant is checked on the model.
describe('token bucket invariant', () => {
  it('never admits more than capacity + rate * T over any interval T', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 20 }),
        fc.constantFrom(0.5, 1, 2, 3, 7, 10, 1_000),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 700 }), fc.integer({ min: 1, max: 3 })), { minLength: 1, maxLength: 80 }),
        async (capacity, rate, raw) => {
          const f = memoryFixture();
          const limit = limitFrom({ name: 'tb', key_by: 'user', algorithm: 'token_bucket', capacity, refill_per_second: rate });
          const key = identityKey('tb', 'user', '1');
          const admitted: { at: number; cost: number }[] = [];
          for (const [step, cost] of raw) {
            f.clock.advance(step);
            if (cost <= capacity && (await decideLimit(f.store, limit, key, cost)).allowed) admitted.push({ at: f.clock.now(), cost });
          }
          for (const [i, first] of admitted.entries()) {
            let units = 0;
            for (const later of admitted.slice(i)) {
              units += later.cost;
              expect(units).toBeLessThanOrEqual(capacity + (rate * (later.at - first.at)) / 1000 + 1e-9);
            }
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
