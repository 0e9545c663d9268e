import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.js';
import { faultPolicies, serviceTrouble, startFaultService, type FaultService } from '../support/fault-service.js';

/**
 * The client cut off from the service, on a link we hold: the quota client
 * (AllowStream batches) reaches a real service process through a TCP proxy
 * (test/support/fault-proxy.ts) that stops forwarding, as a partition does,
 * and later delivers everything it held, in order, as TCP does when the link
 * heals. The callers of the held batches were answered by the client's
 * failure policy at their deadline; the service must spend nothing for them.
 */
const CAPACITY = 100;
const DEADLINE_MS = 100;
/** How long the link stays down after every held caller gave up: far past deadline + allowance, whatever the machine's load. */
const PARTITION_AFTER_GIVING_UP_MS = 1_000;
const policies = faultPolicies(CAPACITY);

let service: FaultService | undefined;
let proxy: FaultProxy | undefined;
let client: QuotaClient | undefined;
let metricsPort = 0;
beforeAll(async () => {
  // The embedded store: what is spent is the service's own state, read back with GetQuota.
  service = await startFaultService({ policies: policies.text, env: { QUOTA_METRICS_ADDR: '127.0.0.1:0', QUOTA_CLOCK_SKEW_ALLOWANCE_MS: '100' } });
  metricsPort = Number(/"port":(\d+)/.exec(await service.process.logged(/"msg":"metrics at GET \/metrics"/))![1]);
  proxy = await startFaultProxy({ targetHost: '127.0.0.1', targetPort: await service.process.port });
  client = createQuotaClient({ address: `127.0.0.1:${proxy.port}`, deadlineMs: DEADLINE_MS, onUnavailable: 'fail_closed' });
});
afterAll(async () => {
  await client?.close();
  await proxy?.close();
  await service?.stop();
});

async function staleRequests(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('quota_stale_requests_total{rpc="AllowStream"} '));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Whole tokens left: the bucket refills a unit in hours (faultPolicies), a fraction during the test. */
const whole = (units: number | undefined) => Math.floor(units ?? Number.NaN);
const remaining = async (user: string) => whole((await service!.client.getQuota({ policy: 'fc', identity: { user } })).limits[0]?.remaining);

describe('a client cut off from the service: what it wrote to the dead link arrives after its callers gave up', () => {
  it('is refused with DEADLINE_EXCEEDED and spends nothing; the calls after the heal are decided as if it never came', async () => {
    const allow = (user: string, deadlineMs = DEADLINE_MS) => client!.allow({ policy: 'fc', identity: { user } }, { deadlineMs });
    // Healthy: the service learns the connection's quickest delivery.
    for (let i = 0; i < 3; i++) expect(await allow('cut')).toMatchObject({ allowed: true, source: 'store' });

    proxy!.stall();
    // Two rounds while the link is down: the second goes on a new stream (the first looked hung and was retired), on the same connection.
    const held: string[] = [];
    for (let round = 0; round < 2; round++) {
      const answers = await Promise.all([1, 2, 3, 4, 5].map(() => allow('cut')));
      held.push(...answers.map((answer) => answer.source));
    }
    expect(held).toEqual(new Array(10).fill('fail_closed'));
    // The partition lasts: every held request is now far older than its caller's deadline.
    await new Promise((resolve) => setTimeout(resolve, PARTITION_AFTER_GIVING_UP_MS));
    proxy!.resume();

    // The first call after the heal comes behind everything the link held (one connection, in order).
    const after = await allow('cut', 10_000);
    expect([after.allowed, after.source, whole(after.limits[0]?.remaining)]).toEqual([true, 'store', CAPACITY - 4]);
    expect(await remaining('cut')).toBe(CAPACITY - 4);
    expect(await staleRequests()).toBe(10);
    expect(serviceTrouble(service!.process)).toEqual([]);
  });
});
