import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditAgainstModel, recoveryMs, windowFigures, type Answer } from '../support/fault-figures.js';
import { runFaultPhase } from '../support/fault-phase.js';
import { startFaultProxyProcess, type FaultProxyProcess } from '../support/fault-proxy-process.js';
import { faultPolicies, serviceTrouble, startFaultService, type FaultService } from '../support/fault-service.js';
import { asIfOnItsOwnHost } from '../support/own-cpu.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';

/**
 * A slow or stalled link between the service process and Redis, made by the
 * fault proxy (test/support/fault-proxy.ts), and a service process that gets
 * no CPU for a while: the production budget (50 ms of store silence) with
 * steady load from three policies, one per failure mode.
 */
const BUDGET_MS = 50;
const HALF_OPEN_MS = 250;
const CAPACITY = 60;
/** Well below ioredis's own 1 s command timeout: a call that waited for it would show here. */
const CEILING_MS = 900;
const POLICIES = ['fo', 'fc', 'lo'];
const policies = faultPolicies(CAPACITY);

let redis: RedisServer | undefined;
let proxy: FaultProxyProcess | undefined;
let service: FaultService | undefined;
beforeAll(async () => {
  redis = await startRedisServer();
  asIfOnItsOwnHost(redis.pid);
  proxy = await startFaultProxyProcess({ targetHost: '127.0.0.1', targetPort: redis.port });
  service = await startFaultService({
    policies: policies.text,
    env: {
      QUOTA_REDIS_URL: `redis://127.0.0.1:${proxy.port}`,
      QUOTA_STORE_TIMEOUT_MS: String(BUDGET_MS),
      QUOTA_BREAKER_HALF_OPEN_MS: String(HALF_OPEN_MS),
    },
  });
});
afterAll(async () => {
  await service?.stop();
  await proxy?.close();
  await redis?.stop();
});

function phase(name: string, faultMs: number, inject: () => void | Promise<void>, heal: () => void | Promise<void>) {
  return runFaultPhase({
    client: service!.client,
    policies: POLICIES,
    users: [`${name}-a`, `${name}-b`],
    intervalMs: 40,
    healthyMs: 500,
    faultMs,
    inject,
    heal,
    recoveryLimitMs: 5_000,
    settleMs: 500,
  });
}

/**
 * CPU throttling as the kernel applies a CPU limit (CFS quota): the process
 * runs for `runMs`, then gets no CPU for `stoppedMs`, over and over. Its event
 * loop is starved and its timers fire late, while Redis answers at once.
 */
function throttled(process: { signal(signal: NodeJS.Signals): void }, { runMs, stoppedMs }: { runMs: number; stoppedMs: number }) {
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  const cycle = () => {
    process.signal('SIGSTOP');
    timer = setTimeout(() => {
      process.signal('SIGCONT');
      if (running) timer = setTimeout(cycle, runMs);
    }, stoppedMs);
  };
  return {
    start() {
      running = true;
      cycle();
    },
    stop() {
      running = false;
      clearTimeout(timer);
      process.signal('SIGCONT');
    },
  };
}

function figuresOf(answers: readonly Answer[], from: number, to: number) {
  return Object.fromEntries(
    POLICIES.map((policy) => {
      const mine = answers.filter((a) => a.policy === policy);
      return [
        policy,
        {
          healthy: windowFigures(mine, from - 500, from),
          during: windowFigures(mine, from, to),
          recoveryMs: recoveryMs(mine, to),
          audit: auditAgainstModel(mine, policies.set, 0),
        },
      ];
    }),
  );
}

describe('a slow or stalled link to Redis, and a service without CPU', () => {
  it.each([20, 100])('+%i ms on every answer: no call fails, no quota granted twice, and the store decides again once the link is fast', async (latencyMs) => {
    const run = await phase(
      `latency${latencyMs}`,
      2_000,
      () => proxy!.setFaults({ latencyMs }),
      () => proxy!.setFaults({}),
    );
    const figures = figuresOf(run.answers, run.faultAt, run.healedAt);
    console.log(`latency ${latencyMs} figures`, JSON.stringify(figures), JSON.stringify(await proxy!.stats()));
    expect(run.answers.filter((a) => a.error !== undefined)).toEqual([]);
    expect(run.stream).toEqual({ sent: run.stream.sent, answered: run.stream.sent, ended: 'OK' });
    for (const policy of POLICIES) {
      expect(figures[policy]!.audit.overGranted).toBe(0);
      expect(figures[policy]!.recoveryMs).toBeDefined();
    }
    expect(serviceTrouble(service!.process)).toEqual([]);
  });

  it('a stall longer than the budget: each failure mode answers while it lasts, then the store decides again', async () => {
    const run = await phase(
      'stall',
      600,
      () => proxy!.stall(),
      () => proxy!.resume(),
    );
    const figures = figuresOf(run.answers, run.faultAt, run.healedAt);
    console.log('stall figures', JSON.stringify(figures), JSON.stringify(await proxy!.stats()));
    expect(run.answers.filter((a) => a.error !== undefined)).toEqual([]);
    expect(run.stream).toEqual({ sent: run.stream.sent, answered: run.stream.sent, ended: 'OK' });
    for (const [mode, policy] of Object.entries(policies.byMode)) {
      const mine = run.answers.filter((a) => a.policy === policy);
      // Started once the link hung and over before it moved again: the store cannot have answered.
      const cut = mine.filter((a) => a.startedAt >= run.faultAt && a.endedAt < run.healedAt);
      expect(cut.length).toBeGreaterThan(3);
      expect(new Set(cut.map((a) => a.source))).toEqual(new Set([mode]));
      expect(figures[policy]!.during.p99Ms).toBeLessThan(CEILING_MS);
      expect(figures[policy]!.audit.overGranted).toBe(0);
      expect(figures[policy]!.recoveryMs).toBeDefined();
    }
    expect(serviceTrouble(service!.process)).toEqual([]);
  });

  it('the service is CPU-throttled (stopped 80 ms of every 100, as a pod over its CPU limit) beside a healthy Redis: the breaker stays closed, the store decides every call', async () => {
    const opened = () => service!.process.output().stdout.split('store circuit open').length - 1;
    const openedBefore = opened();
    const throttle = throttled(service!.process, { runMs: 20, stoppedMs: 80 });
    const run = await phase('throttled', 1_500, throttle.start, throttle.stop);
    const figures = figuresOf(run.answers, run.faultAt, run.healedAt);
    console.log('throttled figures', JSON.stringify(figures));
    expect(run.answers.filter((a) => a.error !== undefined)).toEqual([]);
    expect(run.stream).toEqual({ sent: run.stream.sent, answered: run.stream.sent, ended: 'OK' });
    expect(new Set(run.answers.map((a) => a.source))).toEqual(new Set(['store']));
    expect(opened()).toBe(openedBefore);
    for (const policy of POLICIES) {
      expect(figures[policy]!.audit).toMatchObject({ overGranted: 0, underGranted: 0, drifted: 0 });
    }
    expect(serviceTrouble(service!.process)).toEqual([]);
  });
});
