import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditAgainstModel, recoveryMs, windowFigures } from '../support/fault-figures.js';
import { runFaultPhase } from '../support/fault-phase.js';
import { faultPolicies, serviceTrouble, startFaultService, type FaultService } from '../support/fault-service.js';
import { createNetworkNamespace, netnsSupport, type NetworkNamespace } from '../support/netns.js';
import { asIfOnItsOwnHost } from '../support/own-cpu.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';

/**
 * Redis on another host (a network namespace) is cut off by a real partition:
 * its link goes down, packets vanish, TCP waits. The service process keeps
 * answering from each policy's failure mode within the budget, and when the
 * link comes back the store decides again, with no call failed, no error
 * logged, the AllowStream opened before the partition answering every batch,
 * and no quota granted twice against the reference model; nor is any call that
 * the failure mode answered during the partition spent in the store once it heals.
 */
const support = netnsSupport();
const BUDGET_MS = 100;
const HALF_OPEN_MS = 250;
const CAPACITY = 60;
const HEALTHY_MS = 1_000;
const PARTITION_MS = 3_000;
/** Well below ioredis's own 1 s command timeout: a call that waited for it would show here. */
const CEILING_MS = 900;
/** TCP retransmits on a backoff (200 ms doubling): after a 3 s partition the next try can be 3.2 s away. */
const RECOVERY_LIMIT_MS = 8_000;

describe.skipIf(!support.ok)(`Redis partitioned from the service, then healed${support.ok ? '' : ` (skipped: ${support.reason})`}`, () => {
  let netns: NetworkNamespace | undefined;
  let redis: RedisServer | undefined;
  let service: FaultService | undefined;
  const policies = faultPolicies(CAPACITY);

  beforeAll(async () => {
    netns = createNetworkNamespace();
    redis = await startRedisServer({ netns });
    asIfOnItsOwnHost(redis.pid);
    service = await startFaultService({
      policies: policies.text,
      env: {
        QUOTA_REDIS_URL: redis.url,
        QUOTA_STORE_TIMEOUT_MS: String(BUDGET_MS),
        QUOTA_BREAKER_HALF_OPEN_MS: String(HALF_OPEN_MS),
      },
    });
  });
  afterAll(async () => {
    await service?.stop();
    await redis?.stop();
    netns?.destroy();
  });

  it('each failure mode answers within the budget during the partition; after the heal the store decides again, and nothing is granted twice', async () => {
    const phase = await runFaultPhase({
      client: service!.client,
      policies: ['fo', 'fc', 'lo'],
      users: ['a', 'b'],
      intervalMs: 40,
      healthyMs: HEALTHY_MS,
      faultMs: PARTITION_MS,
      inject: () => netns!.partition(),
      heal: () => netns!.heal(),
      recoveryLimitMs: RECOVERY_LIMIT_MS,
      settleMs: 1_000,
    });
    const { answers, faultAt, healedAt } = phase;
    expect(answers.filter((a) => a.error !== undefined).map((a) => a.error)).toEqual([]);
    const figures = Object.fromEntries(
      Object.entries(policies.byMode).map(([mode, policy]) => {
        const mine = answers.filter((a) => a.policy === policy);
        return [
          mode,
          { during: windowFigures(mine, faultAt, healedAt), recoveryMs: recoveryMs(mine, healedAt), audit: auditAgainstModel(mine, policies.set, healedAt) },
        ];
      }),
    );
    console.log('partition figures', JSON.stringify(figures));

    for (const [mode, policy] of Object.entries(policies.byMode)) {
      const mine = answers.filter((a) => a.policy === policy);
      // Started once the link was down and over before it came back: the failure mode answered each.
      const cut = mine.filter((a) => a.startedAt >= faultAt && a.endedAt < healedAt);
      expect(cut.length).toBeGreaterThan(20);
      expect(new Set(cut.map((a) => a.source))).toEqual(new Set([mode]));
      const { during, recoveryMs: back, audit } = figures[mode]!;
      expect(during.p99Ms).toBeLessThan(CEILING_MS);
      expect(back).toBeDefined();
      expect(back!).toBeLessThan(RECOVERY_LIMIT_MS);
      expect(audit.checked).toBeGreaterThan(10);
      expect(audit.overGranted).toBe(0);
      // The only calls that may still spend in the store after the heal are those already on
      // the wire when the link went down (Redis may have run them, their answers lost): none
      // made during the partition, which the failure mode answered, may spend later.
      const onTheWire = mine.filter((a) => a.startedAt < faultAt && a.endedAt > faultAt && a.source !== 'store').length;
      expect(audit.ghostCharges).toBeLessThanOrEqual(onTheWire);
    }

    // The stream opened before the partition answered every batch and ended cleanly.
    expect(phase.stream).toEqual({ sent: phase.stream.sent, answered: phase.stream.sent, ended: 'OK' });
    expect(phase.stream.sent).toBeGreaterThan(30);
    const { stdout } = service!.process.output();
    expect(stdout).toMatch(/store circuit open/);
    expect(stdout).toMatch(/circuit closed, decisions from the store again/);
    expect(serviceTrouble(service!.process)).toEqual([]);
    expect(await service!.stop()).toBe(0);
    service = undefined;
  });
});
