import { createQuotaClient, type QuotaClient, type QuotaDecision } from '@quota-service/client';
import { auditAgainstModel, recoveryMs, windowFigures, type Answer } from '../../test/support/fault-figures.js';
import { faultPolicies, serviceTrouble, startFaultService } from '../../test/support/fault-service.js';
import { createNetworkNamespace } from '../../test/support/netns.js';
import { asIfOnItsOwnHost } from '../../test/support/own-cpu.js';
import { startPacedLoad } from '../../test/support/paced-load.js';
import { startRedisServer } from '../../test/support/redis-server.js';
import { MODES, type Mode, type ScenarioRow, type ScenarioTiming } from './service-scenarios.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The client partitioned from the service: the service runs in a network
 * namespace (with Redis beside it), the callers here use the
 * client stub (@quota-service/client: AllowStream batches, 250 ms deadline)
 * with its own failure policy, one client per mode, and the link to the
 * service goes down, then up. The service and Redis stay healthy throughout.
 */
export async function runClientPartition(timing: ScenarioTiming, capacity: number): Promise<ScenarioRow[]> {
  const policies = faultPolicies(capacity);
  const netns = createNetworkNamespace();
  const stops: Array<() => Promise<unknown>> = [];
  try {
    // Beside the service, inside the namespace: the partition cuts the callers off, not Redis.
    const redis = await startRedisServer({ netns });
    stops.push(() => redis.stop());
    asIfOnItsOwnHost(redis.pid);
    const service = await startFaultService({ policies: policies.text, env: { QUOTA_REDIS_URL: redis.url, QUOTA_STORE_TIMEOUT_MS: '50' }, netns });
    let exitCode: number | null | undefined;
    stops.push(async () => (exitCode ??= await service.stop()));
    const address = `${netns.address}:${await service.process.port}`;
    // The local emergency limit: half of each limit, as the service's own local mode.
    const localPolicies = faultPolicies(capacity / 2).text;
    const clients: Record<Mode, QuotaClient> = {
      fail_open: createQuotaClient({ address, onUnavailable: 'fail_open' }),
      fail_closed: createQuotaClient({ address, onUnavailable: 'fail_closed' }),
      local: createQuotaClient({ address, onUnavailable: { local: { policies: localPolicies } } }),
    };
    stops.push(async () => Promise.all(Object.values(clients).map((c) => c.close())));
    const policyMode = Object.fromEntries(MODES.map((mode) => [policies.byMode[mode], mode])) as Record<string, Mode>;
    const load = startPacedLoad<QuotaDecision>({
      policies: MODES.map((mode) => policies.byMode[mode]),
      users: Array.from({ length: timing.users }, (_, i) => `u${i}`),
      intervalMs: timing.intervalMs,
      call: (policy, user) => clients[policyMode[policy]!].allow({ policy, identity: { user } }),
    });
    await sleep(timing.healthyMs);
    const faultAt = performance.now();
    netns.partition();
    await sleep(timing.faultMs);
    netns.heal();
    const healedAt = performance.now();
    const answers = (): Answer[] =>
      load.calls
        .filter((c) => !Number.isNaN(c.endedAt))
        .map((c) => ({
          policy: c.policy,
          user: c.user,
          startedAt: c.startedAt,
          endedAt: c.endedAt,
          source: c.response?.source ?? 'error',
          allowed: c.response?.allowed ?? false,
          ...(c.response?.source === 'store' && c.response.limits[0] ? { remaining: c.response.limits[0].remaining } : {}),
          ...(c.error === undefined ? {} : { error: String(c.error) }),
        }));
    while (
      MODES.some(
        (mode) =>
          recoveryMs(
            answers().filter((a) => a.policy === policies.byMode[mode]),
            healedAt,
          ) === undefined,
      ) &&
      performance.now() < healedAt + timing.recoveryLimitMs
    ) {
      await sleep(50);
    }
    await sleep(timing.settleMs);
    await load.stop();
    const trouble = serviceTrouble(service.process);
    exitCode = await service.stop();
    const all = answers();
    return MODES.map((mode) => {
      const mine = all.filter((a) => a.policy === policies.byMode[mode]);
      return {
        scenario: 'client partitioned from the service',
        mode,
        healthy: windowFigures(mine, faultAt - timing.healthyMs, faultAt),
        during: windowFigures(mine, faultAt, healedAt),
        recoveryMs: recoveryMs(mine, healedAt),
        audit: auditAgainstModel(mine, policies.set, healedAt),
        errors: mine.filter((a) => a.source === 'error').length,
        // Every call settled (the load stopped only once each had its answer) and the store answers again.
        streamOk: load.calls.every((c) => !Number.isNaN(c.endedAt)) && recoveryMs(mine, healedAt) !== undefined,
        serviceOk: exitCode === 0 && trouble.length === 0,
        notes: 'sources are the client stub’s own (its failure policy answers past its 250 ms deadline)',
      };
    });
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    netns.destroy();
  }
}
