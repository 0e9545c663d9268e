import { afterAll, describe, expect, it } from 'vitest';
import { useRedisServer } from '../../support/use-redis.js';
import { jsonLines, quotactl } from '../../support/quotactl.js';
import { ADMIN_TOKEN, type LimitJson, writeAdminFixture } from './admin-fixture.js';
import { useServiceReplicas } from './service.js';

// The support desk's session, with quotactl alone and an admin token, against
// three replicas of the service on one Redis: see what a customer has left,
// give them a higher limit for two hours, reset them. Each step goes to one
// replica; the very next call on every replica sees it.

const redis = useRedisServer();
const fixture = writeAdminFixture();
afterAll(() => fixture.remove());
const replicas = useServiceReplicas(3, () => ({ ...fixture.env, QUOTA_REDIS_URL: redis().url }));

/** quotactl against replica `i`, as the support desk (the admin token in QUOTACTL_TOKEN). */
async function on(i: number, args: readonly string[]): Promise<{ code: number; doc: Record<string, unknown> }> {
  const { code, stdout, stderr } = await quotactl(['--json', ...args], { env: { QUOTACTL_ADDR: replicas.addresses()[i]!, QUOTACTL_TOKEN: ADMIN_TOKEN } });
  expect(stderr).toBe('');
  return { code, doc: jsonLines(stdout)[0] ?? {} };
}

const apiLimit = (doc: Record<string, unknown>) => (doc.limits as LimitJson[])[0]!;
const REPLICAS = [0, 1, 2];

describe('a support session on three replicas', () => {
  it('peek, overrides set --ttl 2h, reset: every replica applies each step at once', async () => {
    // The customer used up their bucket (5, refilling one per 1000 s) through two replicas.
    expect((await on(0, ['allow', 'api', 'customer=acme-42', '--cost', '5'])).code).toBe(0);
    expect((await on(1, ['allow', 'api', 'customer=acme-42'])).code).toBe(1);

    // 1. What has the customer left? Nothing, on the default parameters.
    const seen = apiLimit((await on(2, ['peek', 'api', 'customer=acme-42'])).doc);
    expect(seen).toMatchObject({ limit: 5, applied: 'default' });
    expect(seen.remaining).toBeLessThan(1);

    // 2. A higher limit for two hours, through replica 0.
    const before = Date.now();
    const set = await on(0, ['overrides', 'set', 'api', 'acme-42', '--capacity', '50', '--ttl', '2h', '--reason', 'incident 2291']);
    expect(set.code).toBe(0);
    const expiresAtMs = (set.doc.override as { expiresAtMs: number }).expiresAtMs;
    expect(expiresAtMs).toBeGreaterThanOrEqual(before + 7_200_000 - 1_000);
    expect(expiresAtMs).toBeLessThanOrEqual(Date.now() + 7_200_000 + 1_000);
    // Every replica's next look applies it; the tokens the customer had are not a gift of the new capacity.
    for (const i of REPLICAS) {
      const status = apiLimit((await on(i, ['peek', 'api', 'customer=acme-42'])).doc);
      expect({ i, limit: status.limit, applied: status.applied }).toEqual({ i, limit: 50, applied: 'exact_override' });
      expect(status.remaining).toBeLessThan(1);
    }
    const listed = (await on(2, ['overrides', 'list', '--limit', 'api'])).doc.overrides as { value: string; expiresAtMs: number; reason: string }[];
    expect(listed).toEqual([expect.objectContaining({ value: 'acme-42', expiresAtMs, reason: 'incident 2291' })]);

    // 3. Reset, through replica 1: full at the new capacity, on every replica, shared.
    const reset = await on(1, ['reset', 'api', 'customer=acme-42']);
    expect(reset.code).toBe(0);
    expect(apiLimit({ limits: reset.doc.after })).toMatchObject({ limit: 50, remaining: 50, applied: 'exact_override' });
    for (const i of REPLICAS) {
      const allowed = await on(i, ['allow', 'api', 'customer=acme-42', '--cost', '4']);
      expect({ i, code: allowed.code }).toEqual({ i, code: 0 });
      expect(Math.floor(apiLimit(allowed.doc).remaining)).toBe(46 - 4 * i);
    }

    // The override removed early: every replica is back on the default at once, never above it.
    expect((await on(2, ['overrides', 'delete', 'api', 'acme-42'])).code).toBe(0);
    for (const i of REPLICAS) {
      const status = apiLimit((await on(i, ['peek', 'api', 'customer=acme-42'])).doc);
      expect({ i, limit: status.limit, applied: status.applied }).toEqual({ i, limit: 5, applied: 'default' });
      expect(status.remaining).toBeLessThanOrEqual(5);
    }
  }, 60_000);
});
