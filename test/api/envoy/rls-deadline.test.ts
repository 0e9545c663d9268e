import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { watchStalls } from '../../support/loop-stalls.js';
import { sampleSched } from '../../support/sched.js';
import { d, rawShouldRateLimit, rlsConfigDir } from '../../support/rls-client.js';
import { startServiceProcess, type ServiceProcess } from '../../support/service-process.js';
import { useRedisServer } from '../../support/use-redis.js';

/**
 * Envoy sends its timeout with every call (`grpc-timeout: 20m` by default).
 * The service sizes its store budget from it, whatever
 * QUOTA_RLS_STORE_TIMEOUT_MS says for callers that send none: the caller
 * gets its answer, or the domain's failure mode, before it gives up, when
 * the store answers and when it hangs.
 */
const CONFIG = rlsConfigDir({
  'edge.yaml': 'domain: edge\nfailure_mode: fail_open\ndescriptors:\n  - key: client\n    rate_limit: { unit: minute, requests_per_unit: 1000 }\n',
});
/** Calls judged per case; calls the machine stalled through are made again, up to ATTEMPTS in all. */
const JUDGED = 3;
const ATTEMPTS = 100;
/** What the service keeps of Envoy's 20 ms for its answer (storeBudgetMs: 25%). */
const MARGIN_MS = 5;

interface Timed {
  status: number;
  message: string;
  code: string | undefined;
  ms: number;
  stalled: number;
}

describe("a caller's deadline", () => {
  const redis = useRedisServer();
  let service: ServiceProcess;
  let address: string;
  beforeAll(async () => {
    // A budget far past Envoy's timeout for callers without a deadline: a caller's own deadline must win.
    service = startServiceProcess({ QUOTA_REDIS_URL: redis().url, QUOTA_RLS_CONFIG: CONFIG, QUOTA_RLS_STORE_TIMEOUT_MS: '200' });
    address = `127.0.0.1:${await service.port}`;
    await service.logged(/health SERVING/);
  }, 60_000);
  afterAll(async () => {
    redis().signal('SIGCONT');
    service?.signal('SIGKILL');
    await service?.exit;
  });

  /**
   * One call with Envoy's timeout, and how long this machine stalled meanwhile:
   * this process (test/support/loop-stalls.ts) and the service's, which was
   * runnable but waited for a CPU (its main thread's run-queue time; 0 where
   * /proc has no such figure).
   */
  async function call(client: string): Promise<Timed> {
    const stalls = watchStalls(1);
    const before = sampleSched(service.pid);
    const answer = await rawShouldRateLimit(address, { domain: 'edge', descriptors: [d(['client', client])] }, { 'grpc-timeout': '20m' });
    const after = sampleSched(service.pid);
    const serviceWaitedMs = before === undefined || after === undefined ? 0 : (after.waitUs - before.waitUs) / 1000;
    const stalled = stalls.stop() + serviceWaitedMs;
    return { status: answer.status, message: answer.message, code: answer.response?.overall_code, ms: answer.ms, stalled };
  }

  /**
   * Calls until JUDGED of them ran with this machine stalling (this process
   * and the service's together) less than the service's margin: a longer
   * stall can carry a call past its deadline before the service could run at
   * all, which says nothing of the service.
   * Each judged call answers OK within 20 ms plus the stall measured.
   */
  async function judge(prefix: string): Promise<void> {
    const judged: Timed[] = [];
    const all: Timed[] = [];
    for (let i = 0; i < ATTEMPTS && judged.length < JUDGED; i++) {
      const answer = await call(`${prefix}${i}`);
      all.push(answer);
      if (answer.stalled < MARGIN_MS) judged.push(answer);
    }
    expect(judged.length, `the machine stalled through every call: ${JSON.stringify(all)}`).toBe(JUDGED);
    for (const answer of judged) {
      expect(answer).toMatchObject({ status: 0, code: 'OK' });
      expect(answer.ms, JSON.stringify(answer)).toBeLessThanOrEqual(20 + answer.stalled);
    }
  }

  it('the store answers: the answer comes within the 20 ms', async () => {
    await judge('a');
  });

  it('the store hangs: the failure mode answers within the 20 ms, where a budget of 200 ms would have let the caller give up', async () => {
    redis().signal('SIGSTOP');
    try {
      // fail_open: OK, not the DEADLINE_EXCEEDED of a call past the caller's deadline.
      await judge('b');
    } finally {
      redis().signal('SIGCONT');
    }
  });
});
