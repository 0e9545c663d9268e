import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { createChannel, createClient, type Channel } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DecisionSource, QuotaServiceDefinition, type QuotaServiceClient } from '@quota-service/contract';
import { startRedisServer, type RedisServer } from './support/redis-server.js';
import { startServiceProcess, untilServing, type ServiceProcess } from './support/service-process.js';

/**
 * N real service processes on one Redis give one
 * user exactly the global limit, capacity + rate*T, whatever N is, because
 * every decision is one atomic script on Redis's clock.
 *
 * T is read from Redis, not from the test's wall clock: the token bucket
 * stores `ts` (Redis TIME) with every decision, so T runs from the first
 * decision (made alone, spending the whole capacity at once) to the first
 * denial after the concurrent phase (a denial stores ts too). Between those
 * two the bucket never fills up again (that would take capacity/rate = 3 s
 * without a single call), so the tokens account exactly:
 *   allowed units = capacity + rate*T - tokens_left,  0 <= tokens_left < 1.
 * A lost update between replicas (read-modify-write race) would grant more.
 */
const CAPACITY = 30;
const RATE_PER_SECOND = 10;
const REPLICAS = 5;
const FLOOD_MS = 1_500;
const WORKERS = 24;

let redis: RedisServer;
let services: ServiceProcess[] = [];
let channels: Channel[] = [];
let clients: QuotaServiceClient[] = [];
let inspector: Redis | undefined;

beforeAll(async () => {
  redis = await startRedisServer();
  const dir = mkdtempSync(join(tmpdir(), 'quota-replicas-'));
  const policies = join(dir, 'policies.yaml');
  writeFileSync(
    policies,
    'policies:\n  shared:\n    failure_mode: fail_closed\n    limits:\n' +
      `      - { name: shared, key_by: user, algorithm: token_bucket, capacity: ${CAPACITY}, refill_per_second: ${RATE_PER_SECOND} }\n`,
  );
  // One start for all three runs (the 1- and 3-replica runs use the first of them);
  // a 20 s store budget so a stall of this busy machine never hands a decision to the failure mode.
  services = Array.from({ length: REPLICAS }, () =>
    startServiceProcess({ QUOTA_REDIS_URL: redis.url, QUOTA_POLICIES: policies, QUOTA_STORE_TIMEOUT_MS: '20000' }),
  );
  const ports = await Promise.all(services.map((s) => s.port));
  channels = ports.map((port) => createChannel(`127.0.0.1:${port}`));
  await Promise.all(channels.map((channel) => untilServing(channel, 'quota.v1.QuotaService')));
  clients = channels.map((channel) => createClient(QuotaServiceDefinition, channel));
}, 60_000);

afterAll(async () => {
  channels.forEach((channel) => channel.close());
  services.forEach((service) => service.signal('SIGKILL'));
  await Promise.all(services.map((service) => service.exit));
  await redis?.stop();
});

async function bucket(user: string): Promise<{ tokens: number; ts: number }> {
  const hash = await (inspector ??= redis.client()).hgetall(`rl:v1:shared:user:{${user}}`);
  return { tokens: Number(hash.tokens), ts: Number(hash.ts) };
}

describe('replicas share one global limit through Redis', () => {
  it.each([1, 3, 5])('%i service processes: one user gets capacity + rate*T (within 1), measured on Redis time', async (replicas) => {
    const user = `replicas-${replicas}`;
    const pool = clients.slice(0, replicas);
    const sources = new Set<DecisionSource>();
    let allowed = 0;
    let next = 0;
    const call = async (cost = 1) => {
      // Round-robin over the replicas, as a load balancer would spread one user's calls.
      const client = pool[next++ % pool.length]!;
      const response = await client.allow({ policy: 'shared', identity: { user }, cost });
      sources.add(response.source);
      if (response.allowed) allowed += cost;
      return response.allowed;
    };

    // The whole capacity at once: from here on the bucket cannot fill up in any short pause.
    expect(await call(CAPACITY)).toBe(true);
    const first = await bucket(user);
    expect(first.tokens).toBe(0);

    const until = Date.now() + FLOOD_MS;
    await Promise.all(
      Array.from({ length: WORKERS }, async () => {
        while (Date.now() < until) await call(1);
      }),
    );
    // The end of the interval: the first denial once the flood is over (it stores its ts and the tokens left).
    while (await call(1));
    const last = await bucket(user);

    const seconds = (last.ts - first.ts) / 1000;
    const bound = CAPACITY + RATE_PER_SECOND * seconds;
    expect([...sources]).toEqual([DecisionSource.DECISION_SOURCE_STORE]);
    expect(last.tokens).toBeGreaterThanOrEqual(0);
    expect(last.tokens).toBeLessThan(1);
    // The exact account (floating point aside), then the bound within one request.
    expect(Math.abs(allowed + last.tokens - bound)).toBeLessThan(1e-6);
    expect(Math.abs(allowed - bound)).toBeLessThanOrEqual(1);
    // The interval is long enough that the refill part is exercised, not only the capacity.
    expect(allowed).toBeGreaterThan(CAPACITY + 5);
  });
});
