import { auditAgainstModel, recoveryMs, windowFigures, type AuditFigures, type WindowFigures } from '../../test/support/fault-figures.js';
import { runFaultPhase } from '../../test/support/fault-phase.js';
import { startFaultProxyProcess, type FaultProxyProcess } from '../../test/support/fault-proxy-process.js';
import { faultPolicies, serviceTrouble, startFaultService } from '../../test/support/fault-service.js';
import { createNetworkNamespace, type NetworkNamespace } from '../../test/support/netns.js';
import { asIfOnItsOwnHost } from '../../test/support/own-cpu.js';
import { startRedisServer } from '../../test/support/redis-server.js';

/** The three failure modes, each a policy of faultPolicies(). */
export const MODES = ['fail_open', 'fail_closed', 'local'] as const;
export type Mode = (typeof MODES)[number];

/** One row of the table: a scenario, a failure mode, and what callers saw. */
export interface ScenarioRow {
  readonly scenario: string;
  readonly mode: Mode;
  readonly healthy: WindowFigures;
  readonly during: WindowFigures;
  /** ms from the heal until the store decided every call again; undefined if it never did. */
  readonly recoveryMs: number | undefined;
  readonly audit: AuditFigures;
  /** Calls that failed (a gRPC error, or a client error): should be none. */
  readonly errors: number;
  /** The AllowStream (or the client stub's streams) answered every batch and ended cleanly. */
  readonly streamOk: boolean;
  /** The service exited 0 on SIGTERM, logged no error and wrote nothing to stderr. */
  readonly serviceOk: boolean;
  /** Anything worth a footnote (the proxy's own lateness, say). */
  readonly notes: string;
}

export interface ScenarioTiming {
  readonly healthyMs: number;
  readonly faultMs: number;
  readonly settleMs: number;
  readonly recoveryLimitMs: number;
  readonly intervalMs: number;
  readonly users: number;
}

/** Production settings: the defaults of QUOTA_STORE_TIMEOUT_MS, QUOTA_BREAKER_FAILURES, QUOTA_BREAKER_HALF_OPEN_MS. */
const SERVICE_ENV = { QUOTA_STORE_TIMEOUT_MS: '50', QUOTA_BREAKER_FAILURES: '5', QUOTA_BREAKER_HALF_OPEN_MS: '1000' };

/** What a service-side scenario does to the link between the service and Redis. */
export type Fault =
  | { kind: 'partition' }
  | { kind: 'proxy'; inject: (proxy: FaultProxyProcess) => Promise<void>; heal: (proxy: FaultProxyProcess) => Promise<void> };

export const SERVICE_SCENARIOS: Record<string, Fault> = {
  'Redis partitioned, then healed': { kind: 'partition' },
  '+20 ms latency': { kind: 'proxy', inject: (p) => p.setFaults({ latencyMs: 20 }), heal: (p) => p.setFaults({}) },
  '+100 ms latency': { kind: 'proxy', inject: (p) => p.setFaults({ latencyMs: 100 }), heal: (p) => p.setFaults({}) },
  '10% loss (200 ms retransmission)': { kind: 'proxy', inject: (p) => p.setFaults({ lossRate: 0.1, retransmitMs: 200 }), heal: (p) => p.setFaults({}) },
  'stall past the budget': { kind: 'proxy', inject: (p) => p.stall(), heal: (p) => p.resume() },
};

/**
 * One service-side scenario: Redis (in a namespace for a partition, behind the
 * fault proxy otherwise), a service process with production settings, and
 * paced load on one policy per failure mode.
 */
export async function runServiceScenario(name: string, fault: Fault, timing: ScenarioTiming, capacity: number): Promise<ScenarioRow[]> {
  const policies = faultPolicies(capacity);
  let netns: NetworkNamespace | undefined;
  let proxy: FaultProxyProcess | undefined;
  const stops: Array<() => Promise<unknown>> = [];
  try {
    if (fault.kind === 'partition') netns = createNetworkNamespace();
    const redis = await startRedisServer(netns === undefined ? {} : { netns });
    stops.push(() => redis.stop());
    asIfOnItsOwnHost(redis.pid);
    if (fault.kind === 'proxy') {
      proxy = await startFaultProxyProcess({ targetHost: redis.host, targetPort: redis.port });
      stops.push(() => proxy!.close());
    }
    const url = proxy === undefined ? redis.url : `redis://127.0.0.1:${proxy.port}`;
    const service = await startFaultService({ policies: policies.text, env: { ...SERVICE_ENV, QUOTA_REDIS_URL: url } });
    let exitCode: number | null | undefined;
    stops.push(async () => (exitCode ??= await service.stop()));
    const users = Array.from({ length: timing.users }, (_, i) => `u${i}`);
    const phase = await runFaultPhase({
      client: service.client,
      policies: MODES.map((mode) => policies.byMode[mode]),
      users,
      intervalMs: timing.intervalMs,
      healthyMs: timing.healthyMs,
      faultMs: timing.faultMs,
      inject: () => (fault.kind === 'partition' ? netns!.partition() : fault.inject(proxy!)),
      heal: () => (fault.kind === 'partition' ? netns!.heal() : fault.heal(proxy!)),
      recoveryLimitMs: timing.recoveryLimitMs,
      settleMs: timing.settleMs,
    });
    const stats = proxy === undefined ? undefined : await proxy.stats();
    const trouble = serviceTrouble(service.process);
    exitCode = await service.stop();
    const streamOk = phase.stream.ended === 'OK' && phase.stream.answered === phase.stream.sent;
    return MODES.map((mode) => {
      const mine = phase.answers.filter((a) => a.policy === policies.byMode[mode]);
      return {
        scenario: name,
        mode,
        healthy: windowFigures(mine, phase.faultAt - timing.healthyMs, phase.faultAt),
        during: windowFigures(mine, phase.faultAt, phase.healedAt),
        recoveryMs: recoveryMs(mine, phase.healedAt),
        audit: auditAgainstModel(mine, policies.set, phase.healedAt),
        errors: mine.filter((a) => a.source === 'error').length,
        streamOk,
        serviceOk: exitCode === 0 && trouble.length === 0,
        notes: [
          stats === undefined ? '' : `proxy: ${stats.lost.toTarget + stats.lost.toClient} chunks lost, at most ${stats.maxLateMs.toFixed(0)} ms late`,
          trouble.length === 0 ? '' : `service: ${trouble.slice(0, 2).join(' | ')}`,
        ]
          .filter(Boolean)
          .join('; '),
      };
    });
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    netns?.destroy();
  }
}
