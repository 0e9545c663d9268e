import calculateSlot from 'cluster-key-slot';
import { afterAll, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { fixedWindowKey } from '../../clients/core/src/algorithms/fixed-window/model.js';
import { identityKey, parsePolicies } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { createLogger } from '../../src/logger.js';
import { StoreFailurePolicy } from '../../src/engine/failure.js';
import { clusterFixture, type StoreFixture } from '../support/store-fixtures.js';
import { useRedisCluster } from '../support/use-redis.js';

/**
 * A shard outage in the middle of a cross-slot decision (docs/decide-script.md):
 * the user's group is reserved first (lower slot), then the tenant's master is
 * dead (kill -9). The engine refunds the user's reservation and the policy's
 * failure mode answers; the user's bucket is as it was.
 */
const policies = parsePolicies(
  stringify({
    policies: {
      multi: {
        failure_mode: 'fail_closed',
        limits: [
          { name: 'o-bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 },
          { name: 'o-tenant', key_by: 'tenant', algorithm: 'fixed_window', limit: 100, window: 'minute' },
        ],
      },
    },
  }),
);
const bucketKey = (user: string) => identityKey('o-bucket', 'user', user);
const tenantKey = (tenant: string) => fixedWindowKey(identityKey('o-tenant', 'tenant', tenant), 'minute');

const cluster = useRedisCluster();
let f: StoreFixture | undefined;
afterAll(async () => {
  await f?.store.close();
});

it('the tenant shard dies between reservation and decision: the user reservation is refunded, fail_closed answers', async () => {
  f = clusterFixture(cluster());
  await f.store.ready();
  const tenant = 'acme';
  const tenantOwner = await cluster().ownerOf(tenantKey(tenant));
  // A user whose slot comes before the tenant's and lives on another master.
  let user = '';
  for (let i = 0; user === ''; i++) {
    const candidate = `u${i}`;
    if (calculateSlot(bucketKey(candidate)) < calculateSlot(tenantKey(tenant)) && (await cluster().ownerOf(bucketKey(candidate))) !== tenantOwner)
      user = candidate;
  }
  const userOwner = await cluster().ownerOf(bucketKey(user));
  // A budget far above the client's own timeouts, so the store error (not the budget) ends the call.
  const failure = new StoreFailurePolicy({ timeoutMs: 30_000, breakerFailures: 5, halfOpenAfterMs: 60_000, logger: createLogger('silent') });
  const engine = new QuotaEngine(policies, f.store, { failure });
  const allow = () => engine.allow({ policy: 'multi', identity: { user, tenant }, cost: 1, requestId: '' });

  expect(await allow()).toMatchObject({ allowed: true, source: 'store' });
  const bucket = async () => cluster().node(userOwner).hgetall(bucketKey(user));
  const before = await bucket();
  expect(Number(before.tokens)).toBe(9);

  await cluster().crash(tenantOwner);
  expect(await allow()).toMatchObject({ allowed: false, source: 'fail_closed' });
  expect(await bucket()).toEqual(before);
});
