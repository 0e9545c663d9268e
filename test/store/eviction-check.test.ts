import { describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startRedisServer } from '../support/redis-server.js';

/** ready() reads maxmemory-policy once; evictionRisk() is what health and metrics read. */
async function riskWith(args: string[]) {
  const redis = await startRedisServer({ args });
  const store = RedisStore.connect(redis.url);
  try {
    expect(store.parts.evictionRisk()).toBeUndefined();
    await store.ready();
    return { risk: store.parts.evictionRisk(), node: `127.0.0.1:${redis.port}` };
  } finally {
    await store.close();
    await redis.stop();
  }
}

describe('early-eviction guard: a maxmemory-policy that may evict quota state is reported', () => {
  it('noeviction (the default) is safe', async () => {
    const { risk, node } = await riskWith([]);
    expect(risk).toEqual({ status: 'safe', policies: { [node]: 'noeviction' } });
  });

  it.each(['allkeys-lru', 'allkeys-random', 'volatile-lru', 'volatile-ttl'])(
    '%s is a risk, named with the node (every quota key has a TTL)',
    async (policy) => {
      const { risk, node } = await riskWith(['--maxmemory-policy', policy]);
      expect(risk).toMatchObject({ status: 'at_risk', policies: { [node]: policy } });
      expect(risk?.status === 'at_risk' && risk.message).toMatch(new RegExp(`^maxmemory-policy ${policy} on ${node} may evict quota state`));
    },
  );

  it('CONFIG disabled (managed Redis): unknown, said plainly, and ready() still resolves', async () => {
    const { risk } = await riskWith(['--rename-command', 'CONFIG', '']);
    expect(risk).toMatchObject({ status: 'unknown' });
    expect(risk?.status === 'unknown' && risk.message).toMatch(/^could not read maxmemory-policy .*unknown command/i);
  });
});
