import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { type Decision, parsePolicies, SliceHolder } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { storeSliceSource } from '../../src/engine/store-slice-source.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { scriptCalls } from '../support/script-calls.js';
import { useRedisServer } from '../support/use-redis.js';

/**
 * The service's own slices: the engine decides a hot limit's Allow from its
 * slice (source 'slice'), without a script call, and asks the store for
 * everything else: cold identities, requests with a request id, limits
 * without slices.
 */
const policies = parsePolicies(
  stringify({
    policies: {
      tenant: {
        limits: [
          {
            name: 'tenant',
            key_by: 'tenant',
            algorithm: 'token_bucket',
            capacity: 10_000,
            refill_per_second: 1_000,
            slices: { share: 0.05, max_units: 50, ttl_ms: 250 },
          },
        ],
      },
      plain: { limits: [{ name: 'plain', key_by: 'tenant', algorithm: 'token_bucket', capacity: 10_000, refill_per_second: 1_000 }] },
    },
  }),
);
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('the service decides a hot limit from its own slices', () => {
  const redis = useRedisServer();

  async function run(policy: string, requestId: (i: number) => string): Promise<{ sources: Map<string, number>; scripts: number; decisions: Decision[] }> {
    const store = RedisStore.connect(redis().url);
    const slices = new SliceHolder(storeSliceSource(store, 'service-1'));
    const engine = new QuotaEngine(policies, store, { slices });
    const admin = redis().client();
    try {
      await store.ready();
      await admin.config('RESETSTAT');
      const decisions: Decision[] = [];
      for (let i = 0; i < 200; i++) {
        decisions.push(await engine.allow({ policy, identity: { tenant: `acme-${policy}` }, cost: 1, requestId: requestId(i) }));
        if (i % 20 === 0) await settle();
      }
      await slices.close();
      const sources = new Map<string, number>();
      for (const decision of decisions) sources.set(decision.source, (sources.get(decision.source) ?? 0) + 1);
      return { sources, scripts: await scriptCalls(admin), decisions };
    } finally {
      await store.close();
      admin.disconnect();
    }
  }

  it('a hot identity: most Allows come from slices, with far fewer script calls', async () => {
    const { sources, scripts, decisions } = await run('tenant', () => '');
    expect(decisions.every((decision) => decision.allowed)).toBe(true);
    expect(sources.get('slice')).toBeGreaterThan(150);
    expect(scripts).toBeLessThan(50);
    const local = decisions.find((decision) => decision.source === 'slice')!;
    // remaining: what the slice has left, at most max_units.
    expect(local.limits[0]!.name).toBe('tenant');
    expect(local.limits[0]!.remaining).toBeLessThan(50);
  });

  it('requests with a request id, and limits without slices, always ask the store', async () => {
    const withIds = await run('tenant', (i) => `r-${i}`);
    expect(withIds.sources.get('store')).toBe(200);
    const plain = await run('plain', () => '');
    expect(plain.sources.get('store')).toBe(200);
    expect(plain.scripts).toBeGreaterThanOrEqual(200);
  });

  it('the requests of a batch are decided from slices too', async () => {
    const store = RedisStore.connect(redis().url);
    const slices = new SliceHolder(storeSliceSource(store, 'service-2'));
    const engine = new QuotaEngine(policies, store, { slices });
    try {
      await store.ready();
      const sources = new Map<string, number>();
      for (let round = 0; round < 20; round++) {
        const inputs = Array.from({ length: 10 }, () => ({ policy: 'tenant', identity: { tenant: 'acme-batch' }, cost: 1, requestId: '' }));
        const results = await engine.allowEach(inputs, (decision) => decision);
        for (const result of results) {
          expect(result.status).toBe('fulfilled');
          const decision = (result as PromiseFulfilledResult<Decision>).value;
          sources.set(decision.source, (sources.get(decision.source) ?? 0) + 1);
        }
        await settle();
      }
      // A slice of 50 lasts five batches; the batches while a new one is on its way go to the store.
      expect(sources.get('slice')).toBeGreaterThan(100);
    } finally {
      await slices.close();
      await store.close();
    }
  });
});
