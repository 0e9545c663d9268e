import { ClientError, Status } from 'nice-grpc';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parsePolicies } from '@quota-service/core';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startTestService } from '../support/quota-service.js';
import { useRedisServer } from '../support/use-redis.js';

/** TakeSlice: a slice through the service; bad input refused naming the field, nothing taken. */
const policies = parsePolicies(
  stringify({
    policies: {
      hot: {
        limits: [
          {
            name: 'hot',
            key_by: 'tenant',
            algorithm: 'token_bucket',
            capacity: 1000,
            refill_per_second: 1,
            slices: { share: 0.1, max_units: 30, ttl_ms: 250 },
          },
          { name: 'plain', key_by: 'tenant', algorithm: 'token_bucket', capacity: 1000, refill_per_second: 1 },
        ],
      },
    },
  }),
);

describe('TakeSlice', () => {
  const redis = useRedisServer();

  it('takes and gives back through the service; bad input names the field and takes nothing', async () => {
    const store = RedisStore.connect(redis().url);
    const service = await startTestService(store, policies);
    const request: { policy: string; identity: Record<string, string>; limit: string; holder: string; giveBack: number; giveBackOnly: boolean } = {
      policy: 'hot',
      identity: { tenant: 'acme' },
      limit: 'hot',
      holder: 'client-1',
      giveBack: 0,
      giveBackOnly: false,
    };
    const remaining = async () => (await service.client.getQuota({ policy: 'hot', identity: { tenant: 'acme' } })).limits[0]!.remaining;
    const refused = async (changes: Partial<typeof request>) => {
      try {
        await service.client.takeSlice({ ...request, ...changes });
      } catch (error) {
        expect(error).toBeInstanceOf(ClientError);
        return error as ClientError;
      }
      throw new Error('expected TakeSlice to be refused');
    };
    try {
      expect(await service.client.takeSlice(request)).toMatchObject({ taken: 30, validMs: 250, returned: 0 });
      expect(await remaining()).toBeCloseTo(970, 0);
      expect(await service.client.takeSlice({ ...request, giveBack: 30, giveBackOnly: true })).toMatchObject({ taken: 0, returned: 30 });
      const before = await remaining();
      for (const [changes, code, text] of [
        [{ holder: '' }, Status.INVALID_ARGUMENT, 'holder:'],
        [{ holder: 'x'.repeat(201) }, Status.INVALID_ARGUMENT, 'holder:'],
        [{ giveBack: -1 }, Status.INVALID_ARGUMENT, 'give_back:'],
        [{ limit: 'nope' }, Status.INVALID_ARGUMENT, 'limit:'],
        [{ limit: 'plain' }, Status.FAILED_PRECONDITION, 'limit: limit "plain" of policy "hot" has no slices'],
        [{ identity: {} }, Status.INVALID_ARGUMENT, 'identity'],
        [{ policy: 'unknown' }, Status.NOT_FOUND, 'unknown'],
      ] as const) {
        const error = await refused(changes);
        expect(error.code, JSON.stringify(changes)).toBe(code);
        expect(error.details).toContain(text);
      }
      expect(await remaining()).toBe(before);
    } finally {
      await service.stop();
      await store.close();
    }
  });
});
