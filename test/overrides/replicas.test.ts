import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Channel, createChannel, createClient, Metadata } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OverrideMatch, ParameterSource, QuotaAdminServiceDefinition, QuotaServiceDefinition } from '@quota-service/contract';
import { tokenSha256 } from '../../src/config/callers.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';
import { type ServiceProcess, startServiceProcess, untilServing } from '../support/service-process.js';

/**
 * The support session of the admin API on three real service processes
 * sharing one Redis: every change made through one replica applies to the
 * very next decision of every other replica, with no wait and no restart,
 * and a replica started later applies it too (it lives in Redis).
 */
const SUPPORT_TOKEN = 'support-token-5e6f7a8b9c0d1a2b3c4d';
const APP_TOKEN = 'order-api-token-0a1b2c3d4e5f6a7b8c9d';

let redis: RedisServer;
const services: ServiceProcess[] = [];
const channels: Channel[] = [];
let env: Record<string, string>;

const admin = (i: number) =>
  createClient(QuotaAdminServiceDefinition, channels[i]!, { '*': { metadata: Metadata({ authorization: `Bearer ${SUPPORT_TOKEN}` }) } });
const quota = (i: number) => createClient(QuotaServiceDefinition, channels[i]!, { '*': { metadata: Metadata({ authorization: `Bearer ${APP_TOKEN}` }) } });

async function start(): Promise<number> {
  const service = startServiceProcess(env);
  services.push(service);
  const channel = createChannel(`127.0.0.1:${await service.port}`);
  await untilServing(channel);
  channels.push(channel);
  return channels.length - 1;
}

beforeAll(async () => {
  redis = await startRedisServer();
  const dir = mkdtempSync(join(tmpdir(), 'quota-admin-replicas-'));
  const callers = join(dir, 'callers.yaml');
  writeFileSync(
    callers,
    `callers:\n  order-api:\n    token: ${APP_TOKEN}\n    policies: ['*']\n  support:\n    token_sha256: ${tokenSha256(SUPPORT_TOKEN)}\n    policies: ['*']\n    roles: [admin]\n`,
  );
  env = { QUOTA_REDIS_URL: redis.url, QUOTA_AUTH_TOKENS: callers, QUOTA_STORE_TIMEOUT_MS: '20000' };
  for (let i = 0; i < 3; i++) await start();
}, 60_000);

afterAll(async () => {
  for (const channel of channels) channel.close();
  for (const service of services) service.signal('SIGTERM');
  await Promise.all(services.map((s) => s.exit));
  await redis?.stop();
});

const orders = async (i: number, user: string) => (await quota(i).allow({ policy: 'orders', identity: { user } })).limits[0]!;
const peek = async (i: number, user: string) => (await quota(i).getQuota({ policy: 'orders', identity: { user } })).limits[0]!;

describe('three replicas on one Redis', () => {
  it('see a customer, raise their limit for two hours, reset them: every replica applies each step at once', async () => {
    // Every replica has decided for the customer before (its view: no override).
    for (let i = 0; i < 3; i++) expect(await orders(i, 'cust-9')).toMatchObject({ limit: 10, applied: ParameterSource.PARAMETER_SOURCE_DEFAULT });
    // Three spent (the real clock refills 2 per second meanwhile).
    expect((await peek(1, 'cust-9')).remaining).toBeLessThan(10);

    // Replica 0 raises the limit for two hours; 1 and 2 apply it to their very next call.
    const { current } = await admin(0).setOverride({
      key: { limit: 'orders', match: OverrideMatch.OVERRIDE_MATCH_EXACT, value: 'cust-9' },
      parameters: { tokenBucket: { capacity: 100, refillPerSecond: 0 } },
      ttlMs: 2 * 3600 * 1000,
      reason: 'incident: bulk import',
    });
    expect(current!.expiresAtMs - current!.setAtMs).toBe(7_200_000);
    for (const i of [1, 2]) expect(await peek(i, 'cust-9')).toMatchObject({ limit: 100, applied: ParameterSource.PARAMETER_SOURCE_EXACT_OVERRIDE });
    expect(await orders(2, 'cust-9')).toMatchObject({ limit: 100, applied: ParameterSource.PARAMETER_SOURCE_EXACT_OVERRIDE });

    // A prefix override through replica 1.
    await admin(1).setOverride({
      key: { limit: 'orders', match: OverrideMatch.OVERRIDE_MATCH_PREFIX, value: 'premium_' },
      parameters: { tokenBucket: { capacity: 50, refillPerSecond: 0 } },
      ttlMs: 0,
      reason: 'premium tier',
    });
    for (const i of [0, 2]) expect(await orders(i, `premium_${i}`)).toMatchObject({ limit: 50, applied: ParameterSource.PARAMETER_SOURCE_WILDCARD_OVERRIDE });

    // A replica started now applies both (they are in Redis, not in a process).
    const late = await start();
    expect(await peek(late, 'cust-9')).toMatchObject({ limit: 100, applied: ParameterSource.PARAMETER_SOURCE_EXACT_OVERRIDE });
    expect(await peek(late, 'premium_x')).toMatchObject({ limit: 50, applied: ParameterSource.PARAMETER_SOURCE_WILDCARD_OVERRIDE });

    // Reset through replica 2: every replica sees a full bucket.
    const reset = await admin(2).resetQuota({ policy: 'orders', identity: { user: 'cust-9' } });
    expect(reset.after[0]).toMatchObject({ remaining: 100, limit: 100 });
    for (const i of [0, 1, late]) expect((await peek(i, 'cust-9')).remaining).toBe(100);

    // Deleting through the late one: the others fall back at once.
    await admin(late).deleteOverride({ key: { limit: 'orders', match: OverrideMatch.OVERRIDE_MATCH_EXACT, value: 'cust-9' } });
    await admin(late).deleteOverride({ key: { limit: 'orders', match: OverrideMatch.OVERRIDE_MATCH_PREFIX, value: 'premium_' } });
    for (const i of [0, 1, 2]) {
      expect(await peek(i, 'cust-9')).toMatchObject({ limit: 10, remaining: 10, applied: ParameterSource.PARAMETER_SOURCE_DEFAULT });
      expect(await peek(i, 'premium_0')).toMatchObject({ limit: 10, applied: ParameterSource.PARAMETER_SOURCE_DEFAULT });
    }
    expect((await admin(0).listOverrides({})).overrides).toEqual([]);

    // Each admin action is one audit line on the replica that did it, naming the caller.
    const audit = (i: number) =>
      services[i]!.output()
        .stdout.split('\n')
        .filter((line) => line.includes('"component":"audit"'));
    expect(audit(0).some((line) => line.includes('"audit":"override.set"') && line.includes('"caller":"support"'))).toBe(true);
    expect(audit(2).some((line) => line.includes('"audit":"reset"'))).toBe(true);
    for (const service of services) expect(service.output().stdout).not.toContain(SUPPORT_TOKEN);
  }, 60_000);
});
