import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRlsConfig } from '../../../src/api/envoy/rls-config.js';
import { HangingStore } from '../../support/hanging-store.js';
import { watchStalls } from '../../support/loop-stalls.js';
import { startTestService, type TestService } from '../../support/quota-service.js';
import { d, header, metadataOf, type RlsClient, rlsClient } from '../../support/rls-client.js';

/**
 * When the store cannot answer within this API's budget, each domain's
 * failure mode answers, within the budget: error (UNAVAILABLE, so Envoy's own
 * failure_mode_deny decides), fail_open, fail_closed, local.
 */
const domain = (name: string, mode: string) =>
  `domain: ${name}\nfailure_mode: ${mode}\n${mode === 'local' ? 'local_share: 0.5\n' : ''}descriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 4 }\n`;
const config = parseRlsConfig(
  new Map([
    ['error.yaml', domain('err', 'error')],
    ['warm.yaml', domain('warm', 'error')],
    ['open.yaml', domain('open', 'fail_open')],
    ['closed.yaml', domain('closed', 'fail_closed')],
    ['local.yaml', domain('local', 'local')],
  ]),
);
const BUDGET_MS = 15;

let store: HangingStore;
let service: TestService;
let client: RlsClient;
beforeAll(async () => {
  store = new HangingStore();
  service = await startTestService(store, undefined, undefined, { config: () => config, timeoutMs: BUDGET_MS, shadowMode: false, rateLimitHeaders: true });
  client = rlsClient(`127.0.0.1:${service.server.port}`);
  // Connected, both codecs warm, and the path of a failed store call run once, before anything is timed.
  await client.shouldRateLimit({ domain: 'nobody', descriptors: [d(['a', 'b'])] });
  await client.shouldRateLimit({ domain: 'warm', descriptors: [d(['k', 'a'])] }).catch(() => undefined);
});
afterAll(async () => {
  client?.close();
  await service?.stop();
  await store?.close();
});

/** The call and how long it took, measured around it as a proxy would. */
async function timed<T>(call: () => Promise<T>): Promise<{ value: T | undefined; error: { code?: number; details?: string } | undefined; ms: number }> {
  const started = performance.now();
  try {
    const value = await call();
    return { value, error: undefined, ms: performance.now() - started };
  } catch (error) {
    return { value: undefined, error: error as { code?: number }, ms: performance.now() - started };
  }
}

describe('a store that does not answer', () => {
  it('error (the default): UNAVAILABLE, so that the proxy applies its own failure_mode_deny; answered within the budget, not seconds later', async () => {
    const asked = store.asked;
    const stalls = watchStalls();
    const { error, ms } = await timed(() => client.shouldRateLimit({ domain: 'err', descriptors: [d(['k', 'a'])] }));
    const stalled = stalls.stop();
    expect(error).toMatchObject({ code: 14 });
    expect(store.asked).toBeGreaterThan(asked);
    // The budget, plus the time this process could not run (a shared machine's stalls, which the
    // deadline does not hold against the store), plus a margin; far from Envoy's seconds-long outage symptoms.
    expect(ms, `stalled ${stalled.toFixed(0)} ms`).toBeLessThan(BUDGET_MS + stalled + 200);
  });

  it('fail_open: OK, the limit named, nothing remaining claimed', async () => {
    const { value } = await timed(() => client.shouldRateLimit({ domain: 'open', descriptors: [d(['k', 'a'])] }));
    expect(value?.overall_code).toBe('OK');
    expect(value?.statuses[0]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 4 }, limit_remaining: 0 });
  });

  it('fail_closed: OVER_LIMIT with the body the HTTP adapters send when the limiter is unavailable', async () => {
    const { value } = await timed(() => client.shouldRateLimit({ domain: 'closed', descriptors: [d(['k', 'a'])] }));
    expect(value?.overall_code).toBe('OVER_LIMIT');
    expect(JSON.parse(value!.raw_body.toString())).toMatchObject({ error: 'rate_limiter_unavailable', policy: 'closed', limit: '' });
    expect(header(value!, 'Retry-After')).toBe('1');
    expect(metadataOf(value!)).toMatchObject({ source: 'fail_closed' });
  });

  it('local: this instance decides its share of the limit on its own (half of 4: 2)', async () => {
    const codes: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { value } = await timed(() => client.shouldRateLimit({ domain: 'local', descriptors: [d(['k', 'a'])] }));
      codes.push(value!.overall_code);
      if (value!.overall_code === 'OVER_LIMIT') expect(metadataOf(value!)).toMatchObject({ source: 'local' });
    }
    expect(codes).toEqual(['OK', 'OK', 'OVER_LIMIT']);
  });

  it('a request with no rule to apply needs no store: answered OK at once', async () => {
    const asked = store.asked;
    const { value } = await timed(() => client.shouldRateLimit({ domain: 'err', descriptors: [d(['no-rule', 'a'])] }));
    expect(value?.overall_code).toBe('OK');
    expect(store.asked).toBe(asked);
  });
});
