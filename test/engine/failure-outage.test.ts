import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import { ClientError } from 'nice-grpc';
import { afterEach, describe, expect, it } from 'vitest';
import { parsePolicies } from '@quota-service/core';
import { DecisionSource, type AllowResponse } from '@quota-service/contract';
import { createLogger } from '../../src/logger.js';
import { StoreFailurePolicy, type StoreFailureKind } from '../../src/engine/failure.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { startTestService, type TestService } from '../support/quota-service.js';

/**
 * The store dies under load (SIGSTOP: a hung Redis whose
 * connections stay open; then SIGKILL: a dead one) and each policy's failure
 * mode must hold, without a gRPC error and without the outage adding more
 * than the timeout budget to the latency.
 *
 * Latency is checked twice. Inside the service (the engine's decision time,
 * what the budget bounds): p99 during the outage <= budget + the longest
 * event-loop stall seen during the run + SERVICE_MARGIN_MS. End to end (gRPC
 * client in the same process, 8 concurrent callers): outage p99 minus healthy
 * p99 <= budget + that stall + E2E_MARGIN_MS. The budget is a timer, and a
 * timer fires late by exactly the event loop's lag: on the 2-core machine
 * shared with other suites, stalls of 100-300 ms were measured (figures in
 * docs/operations.md), so a fixed margin is either flaky or too loose to
 * mean anything. A hard ceiling below ioredis's own 1 s command timeout
 * catches what the test is there for: calls waiting on the dead store.
 */
const TIMEOUT_MS = 50;
const SERVICE_MARGIN_MS = 25;
const E2E_MARGIN_MS = 50;
const CEILING_MS = 900;
const HALF_OPEN_MS = 300;
const HEALTHY_MS = 800;
const FROZEN_MS = 1_200;
const DEAD_MS = 800;
const WORKERS = 8;
const USERS = ['u1', 'u2', 'u3', 'u4'];
const CAPACITY = 20;
const RATE = 10;
const SHARE = 0.5;

const policies = parsePolicies(`
policies:
  open:
    failure_mode: fail_open
    limits: [{ name: open, key_by: user, algorithm: token_bucket, capacity: ${CAPACITY}, refill_per_second: ${RATE} }]
  closed:
    failure_mode: fail_closed
    limits: [{ name: closed, key_by: user, algorithm: token_bucket, capacity: ${CAPACITY}, refill_per_second: ${RATE} }]
  local:
    failure_mode: local
    local_share: ${SHARE}
    limits: [{ name: local, key_by: user, algorithm: token_bucket, capacity: ${CAPACITY}, refill_per_second: ${RATE} }]
`);

interface Call {
  startedAt: number;
  ms: number;
  user: string;
  response?: AllowResponse;
  error?: unknown;
}

function p99(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? 0;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let redis: RedisServer | undefined;
let service: TestService | undefined;
afterEach(async () => {
  await service?.stop();
  await redis?.stop();
  service = undefined;
  redis = undefined;
});

describe('store outage under load: no gRPC error, each failure mode answers within the timeout budget', () => {
  it.each(['open', 'closed', 'local'] as const)('failure_mode %s', async (policy) => {
    redis = await startRedisServer();
    const lines: string[] = [];
    const logger = createLogger('debug', new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
    const failures: { kind: StoreFailureKind; at: number }[] = [];
    const events = { storeFailure: (kind: StoreFailureKind) => failures.push({ kind, at: performance.now() }), circuitStates: () => {} };
    const failure = new StoreFailurePolicy({ timeoutMs: TIMEOUT_MS, breakerFailures: 5, halfOpenAfterMs: HALF_OPEN_MS, logger, events });
    const decided: { at: number; ms: number }[] = [];
    service = await startTestService(RedisStore.connect(redis.url), policies, {
      failure,
      onDecision: (_policy, _decision, seconds) => decided.push({ at: performance.now() - seconds * 1000, ms: seconds * 1000 }),
    });
    const client = service.client;

    // Warm up (connections, script cache, JIT) so the healthy p99 is not the first call's.
    for (let i = 0; i < 50; i++) await client.allow({ policy, identity: { user: 'warm-up' } });

    const calls: Call[] = [];
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    let running = true;
    const worker = async (w: number) => {
      for (let i = 0; running; i++) {
        const user = USERS[(w + i) % USERS.length]!;
        const startedAt = performance.now();
        const call: Call = { startedAt, ms: 0, user };
        try {
          call.response = await client.allow({ policy, identity: { user } });
        } catch (error) {
          call.error = error;
        }
        call.ms = performance.now() - startedAt;
        calls.push(call);
      }
    };
    const load = Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));

    await sleep(HEALTHY_MS);
    const frozenAt = performance.now();
    redis.signal('SIGSTOP');
    await sleep(FROZEN_MS);
    const deadAt = performance.now();
    redis.signal('SIGKILL');
    await sleep(DEAD_MS);
    running = false;
    await load;
    const outageEnd = performance.now();
    lag.disable();
    const stallMs = lag.max / 1e6;

    // No call fails: not UNKNOWN, not INTERNAL, not UNAVAILABLE.
    const errors = calls
      .filter((c) => c.error !== undefined)
      .map((c) => (c.error instanceof ClientError ? `${c.error.code} ${c.error.details}` : String(c.error)));
    expect(errors).toEqual([]);

    const healthy = calls.filter((c) => c.startedAt + c.ms < frozenAt);
    const outage = calls.filter((c) => c.startedAt >= frozenAt);
    expect(healthy.length).toBeGreaterThan(50);
    expect(outage.length).toBeGreaterThan(50);
    // Healthy Redis: the store decides, except where a stall of this busy machine ran past the
    // budget; each of those is a counted timeout, never an error.
    const healthyFailures = failures.filter((f) => f.at < frozenAt);
    expect(healthyFailures.filter((f) => f.kind === 'error')).toEqual([]);
    expect(healthy.filter((c) => c.response!.source !== DecisionSource.DECISION_SOURCE_STORE).length).toBeLessThanOrEqual(healthyFailures.length);

    const sources = new Set(outage.map((c) => c.response!.source));
    const allowed = outage.filter((c) => c.response!.allowed);
    switch (policy) {
      case 'open':
        expect([...sources]).toEqual([DecisionSource.DECISION_SOURCE_FAIL_OPEN]);
        expect(allowed).toHaveLength(outage.length);
        break;
      case 'closed':
        expect([...sources]).toEqual([DecisionSource.DECISION_SOURCE_FAIL_CLOSED]);
        expect(allowed).toHaveLength(0);
        expect(outage.every((c) => c.response!.retryAfterMs === HALF_OPEN_MS)).toBe(true);
        break;
      case 'local': {
        expect([...sources]).toEqual([DecisionSource.DECISION_SOURCE_LOCAL]);
        // Each user gets at most this instance's share: a bucket of share*capacity, refilled at share*rate.
        // At least the refill: the local bucket may have been spent by healthy-phase timeouts.
        const seconds = (outageEnd - frozenAt) / 1000;
        const most = SHARE * CAPACITY + SHARE * RATE * seconds + 1;
        const least = Math.floor(SHARE * RATE * seconds) - 1;
        for (const user of USERS) {
          const granted = allowed.filter((c) => c.user === user).length;
          expect(granted).toBeGreaterThanOrEqual(least);
          expect(granted).toBeLessThanOrEqual(most);
        }
        break;
      }
    }

    const serviceP99 = p99(decided.filter((d) => d.at >= frozenAt).map((d) => d.ms));
    expect(serviceP99).toBeLessThanOrEqual(TIMEOUT_MS + stallMs + SERVICE_MARGIN_MS);
    expect(serviceP99).toBeLessThan(CEILING_MS);
    const healthyP99 = p99(healthy.map((c) => c.ms));
    const outageP99 = p99(outage.map((c) => c.ms));
    const addedP99 = outageP99 - healthyP99;
    expect(addedP99).toBeLessThanOrEqual(TIMEOUT_MS + stallMs + E2E_MARGIN_MS);
    expect(addedP99).toBeLessThan(CEILING_MS);

    // One warning per outage, however many calls and probes fail: the circuit opened
    // (at the latest during the outage), and every further warning needs a close before
    // it. A stall of this busy machine in the healthy phase may have opened it early,
    // possibly without a close before the outage began, so count over the whole run.
    const count = (text: string) => lines.filter((l) => l.includes(text)).length;
    const opened = count('store circuit open');
    expect(opened).toBeGreaterThanOrEqual(1);
    expect(opened).toBeLessThanOrEqual(count('circuit closed') + 1);
    expect(count('"level":40')).toBe(opened);
    const since = (epochMs: number) => lines.filter((l) => (JSON.parse(l) as { time: number }).time >= epochMs);

    const frozenCalls = outage.filter((c) => c.startedAt < deadAt);
    const report = {
      policy,
      calls: calls.length,
      healthy: { calls: healthy.length, downstream: healthy.filter((c) => c.response!.allowed).length, p99Ms: round(healthyP99) },
      outage: {
        calls: outage.length,
        downstream: allowed.length,
        frozenP99Ms: round(p99(frozenCalls.map((c) => c.ms))),
        deadP99Ms: round(p99(outage.filter((c) => c.startedAt >= deadAt).map((c) => c.ms))),
        p99Ms: round(outageP99),
        addedP99Ms: round(addedP99),
        serviceP99Ms: round(serviceP99),
      },
      longestStallMs: round(stallMs),
      healthyTimeouts: healthyFailures.length,
    };
    // The figures docs/operations.md quotes (run: npx vitest run test/store/failure-outage.test.ts).
    process.stdout.write(`outage figures ${JSON.stringify(report)}\n`);

    // Redis back on the same port: a probe succeeds, the circuit closes, one line says so.
    const port = redis.port;
    const restartedAtEpoch = Date.now();
    await redis.stop();
    redis = await startRedisServer({ port });
    const deadline = Date.now() + 10_000;
    let response: AllowResponse | undefined;
    while (response?.source !== DecisionSource.DECISION_SOURCE_STORE && Date.now() < deadline) {
      response = await client.allow({ policy, identity: { user: 'after' } });
      if (response.source !== DecisionSource.DECISION_SOURCE_STORE) await sleep(50);
    }
    expect(response?.source).toBe(DecisionSource.DECISION_SOURCE_STORE);
    expect(since(restartedAtEpoch).filter((l) => l.includes('circuit closed'))).toHaveLength(1);
    await failure.close();
  });
});

const round = (ms: number) => Math.round(ms * 10) / 10;
