import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { type GroupDecision, parsePolicies } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import type { ScriptStep } from '../../src/store/redis/cross-slot/saga.js';
import { keySlot } from '../../src/store/redis/key-slot.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { useClusterFixture } from '../support/use-redis.js';

/**
 * A Settle whose limits lie in two slots of a Redis Cluster (3 masters, 3
 * replicas): the record's slot is settled first, the other slot after. When
 * that second step fails, a retry completes it, and no retry adjusts a slot
 * twice, whether the failed step never reached Redis or reached it and only
 * its answer was lost.
 */
const policies = parsePolicies(
  stringify({
    policies: {
      bulk: {
        request_id_ttl_ms: 60_000,
        limits: [
          { name: 'bulk-user', key_by: 'user', algorithm: 'fixed_window', limit: 100, window: 'hour' },
          { name: 'bulk-tenant', key_by: 'tenant', algorithm: 'gcra', capacity: 100, refill_per_second: 0.5 },
        ],
      },
    },
  }),
);
const identity = { tenant: 'acme', user: 'u1' };

type Fault = 'before-redis' | 'answer-lost';

/**
 * The cluster store, except that the next refund or charge (here: the
 * adjustment of a settlement's later slot group) fails once: before it is sent,
 * or after Redis ran it, as a timeout or a dropped connection would.
 */
class FailingOnce extends RedisStore {
  armed: Fault | undefined;
  failed = 0;

  protected override runScripts(steps: readonly ScriptStep[]): Promise<Array<GroupDecision | Error>> {
    const fault = this.armed;
    const at = steps.findIndex((step) => step.mode === 'refund' || step.mode === 'charge');
    if (fault === undefined || at < 0) return super.runScripts(steps);
    this.armed = undefined;
    this.failed++;
    const injected = new Error(fault === 'before-redis' ? 'injected: the shard did not answer' : 'injected: the answer was lost');
    const others = steps.filter((_, i) => i !== at || fault === 'answer-lost');
    return super.runScripts(others).then((answers) => {
      if (fault === 'answer-lost') answers[at] = injected;
      else answers.splice(at, 0, injected);
      return answers;
    });
  }
}

describe('Settle across slots, Redis Cluster: a retry finishes what a failed call left, once', () => {
  const { fixture } = useClusterFixture();

  for (const fault of ['before-redis', 'answer-lost'] as const) {
    for (const [estimate, actual] of [
      [40, 30],
      [40, 55],
    ] as const) {
      it(`${actual < estimate ? 'refund' : 'charge'}, the later group's step failing ${fault}`, async () => {
        const f = fixture();
        expect(keySlot('rl:v1:bulk-user:user:{u1}')).not.toBe(keySlot('rl:v1:bulk-tenant:tenant:{acme}'));
        const failing = new FailingOnce((f.store as RedisStore).client, { clock: f.clock });
        const engine = new QuotaEngine(policies, failing);
        const remaining = async () => (await engine.getQuota({ policy: 'bulk', identity })).map((l) => l.remaining);

        expect((await engine.allow({ policy: 'bulk', identity, cost: estimate, requestId: 'job-1' })).allowed).toBe(true);
        expect(await remaining()).toEqual([100 - estimate, 100 - estimate]);

        failing.armed = fault;
        await expect(engine.settle({ policy: 'bulk', identity, requestId: 'job-1', actualCost: actual })).rejects.toThrow(/injected/);
        expect(failing.failed).toBe(1);
        // The record's slot is settled; the other one has its adjustment only if Redis ran it.
        const after = await remaining();
        expect(after).toContain(100 - actual);
        expect(after).toContain(fault === 'before-redis' ? 100 - estimate : 100 - actual);

        // A retry (even with another actual cost) completes the settlement the record holds.
        const retried = await engine.settle({ policy: 'bulk', identity, requestId: 'job-1', actualCost: 1 });
        expect(retried).toMatchObject({ estimate, actualCost: actual, delta: actual - estimate, alreadySettled: true });
        expect(retried.limits.map((l) => l.remaining)).toEqual([100 - actual, 100 - actual]);
        expect(await remaining()).toEqual([100 - actual, 100 - actual]);

        // And again: nothing moves.
        await engine.settle({ policy: 'bulk', identity, requestId: 'job-1', actualCost: actual });
        expect(await remaining()).toEqual([100 - actual, 100 - actual]);
      });
    }
  }
});
