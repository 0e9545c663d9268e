import { describe, expect, it } from 'vitest';
import { parseRlsConfig, parseRlsFile } from '../../src/api/envoy/rls-config.js';
import { decideRls } from '../../src/api/envoy/rls-decide.js';
import { matchRule } from '../../src/api/envoy/rls-match.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { storeSliceSource } from '../../src/engine/store-slice-source.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { SliceHolder } from '@quota-service/core';
import { useRedisServer } from '../support/use-redis.js';

/** The Envoy door: a rule's own `slices` key, and the service's slices deciding it. */
const CONFIG = `domain: edge
descriptors:
  - key: backend
    value: orders
    rate_limit: { unit: second, requests_per_unit: 10000 }
    slices: { share: 0.05, max_units: 50, ttl_ms: 250 }
  - key: tenant
    limit: { algorithm: token_bucket, capacity: 1000, refill_per_second: 100 }
    slices: { share: 0.1, max_units: 20, ttl_ms: 500 }
  - key: plain
    rate_limit: { unit: second, requests_per_unit: 10000 }
`;

describe("the Envoy door's rule slices", () => {
  it('a rule with rate_limit or a bucket limit takes slices; other rules have none', () => {
    const domain = parseRlsFile(CONFIG, 'edge.yaml');
    expect(matchRule(domain.root, [{ key: 'backend', value: 'orders' }])?.limit?.slices).toEqual({ share: 0.05, maxUnits: 50, ttlMs: 250 });
    expect(matchRule(domain.root, [{ key: 'tenant', value: 'acme' }])?.limit?.slices).toEqual({ share: 0.1, maxUnits: 20, ttlMs: 500 });
    expect(matchRule(domain.root, [{ key: 'plain', value: 'x' }])?.limit?.slices).toBeUndefined();
  });

  it.each([
    [
      'a sliding window limit',
      'limit: { algorithm: sliding_window_log, limit: 10, window: minute }',
      'slices: only on a rule with rate_limit, or with a limit of token_bucket, gcra, fixed_window',
    ],
    ['no limit at all', '', 'slices: only on a rule with rate_limit, or with a limit of'],
  ])('is refused on %s, naming the key', (_, limit, message) => {
    const text = `domain: edge\ndescriptors:\n  - key: a\n    ${limit}\n    slices: { share: 0.05, max_units: 50, ttl_ms: 250 }\n`;
    expect(() => parseRlsFile(text, 'edge.yaml')).toThrow(message);
  });

  it('refuses a bad share, naming the field', () => {
    const text =
      'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: { unit: second, requests_per_unit: 5 }\n    slices: { share: 2, max_units: 50, ttl_ms: 250 }\n';
    expect(() => parseRlsFile(text, 'edge.yaml')).toThrow(/slices\.share: must be at most 1/);
  });

  describe('decided by the service', () => {
    const redis = useRedisServer();

    it("a hot rule is answered from the service's slices (source slice), a cold one by the store", async () => {
      const config = parseRlsConfig(new Map([['edge.yaml', CONFIG]]));
      const store = RedisStore.connect(redis().url);
      const slices = new SliceHolder(storeSliceSource(store, 'service-1'));
      const engine = new QuotaEngine(new Map(), store, { slices });
      try {
        await store.ready();
        const sources = new Map<string, number>();
        for (let i = 0; i < 100; i++) {
          const decision = await decideRls(
            engine,
            config,
            { domain: 'edge', descriptors: [{ entries: [{ key: 'backend', value: 'orders' }] }], hits_addend: 1 },
            1_000,
          );
          expect(decision.over).toBe(false);
          sources.set(decision.source, (sources.get(decision.source) ?? 0) + 1);
          if (i % 10 === 0) await new Promise((resolve) => setImmediate(resolve));
        }
        expect(sources.get('slice')).toBeGreaterThan(50);
        const plain = await decideRls(engine, config, { domain: 'edge', descriptors: [{ entries: [{ key: 'plain', value: 'x' }] }], hits_addend: 1 }, 1_000);
        expect(plain.source).toBe('store');
      } finally {
        await slices.close();
        await store.close();
      }
    });
  });
});
