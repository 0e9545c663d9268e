import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { parsePolicies, type SourcelessDecision, StoreUnavailableError } from '@quota-service/core';
import { createLogger } from '../../src/logger.js';
import { StoreFailurePolicy, type StoreFailureKind } from '../../src/engine/failure.js';
import { decideLimit } from '../support/store-calls.js';

/**
 * The failure policy on its own: the "store call" is a plain function whose
 * promise the test controls (what the real-Redis outage test cannot pin down:
 * which errors count, when the store is not asked at all).
 */
const policies = parsePolicies(`
policies:
  open: { failure_mode: fail_open, limits: [{ name: open, key_by: user, algorithm: token_bucket, capacity: 4, refill_per_second: 1 }] }
  closed: { failure_mode: fail_closed, limits: [{ name: closed, key_by: user, algorithm: token_bucket, capacity: 4, refill_per_second: 1 }] }
  local: { failure_mode: local, local_share: 0.5, limits: [{ name: local, key_by: user, algorithm: token_bucket, capacity: 4, refill_per_second: 1 }] }
`);
const policy = (name: string) => policies.get(name)!;
const STORE_DECISION: SourcelessDecision = { allowed: true, retryAfterMs: 0, deniedBy: '', limits: [], delayMs: 0 };

function setup(halfOpenAfterMs = 60_000) {
  const lines: string[] = [];
  const kinds: StoreFailureKind[] = [];
  const failure = new StoreFailurePolicy({
    timeoutMs: 20,
    breakerFailures: 3,
    halfOpenAfterMs,
    logger: createLogger('debug', new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) })),
    events: { storeFailure: (kind) => kinds.push(kind), circuitStates: () => {} },
  });
  let storeCalls = 0;
  const decide = (name: string, store: () => Promise<SourcelessDecision>, partition?: string) =>
    failure.decide(
      policy(name),
      () => {
        storeCalls++;
        return store();
      },
      async (local, scale) => {
        const limit = scale(policy(name).limits[0]!);
        const outcome = await decideLimit(local, limit, `rl:v1:${limit.name}:user:{u}`, 1);
        return { allowed: outcome.allowed, retryAfterMs: outcome.retryAfterMs, deniedBy: outcome.allowed ? '' : limit.name, limits: [], delayMs: 0 };
      },
      partition,
    );
  return { failure, decide, lines, kinds, storeCalls: () => storeCalls };
}

const down = () => Promise.reject(new StoreUnavailableError(new Error('connect ECONNREFUSED')));
const hung = () => new Promise<SourcelessDecision>(() => {});

describe('store failure policy', () => {
  it('a store answer is passed through with source store', async () => {
    const { decide, kinds } = setup();
    expect(await decide('closed', async () => STORE_DECISION)).toEqual({ ...STORE_DECISION, source: 'store' });
    expect(kinds).toEqual([]);
  });

  it('each mode: fail_open allows, fail_closed denies with the probe interval as retry, local uses the scaled limit', async () => {
    const { decide } = setup(1_500);
    expect(await decide('open', down)).toEqual({ allowed: true, retryAfterMs: 0, deniedBy: '', limits: [], delayMs: 0, source: 'fail_open' });
    expect(await decide('closed', down)).toEqual({ allowed: false, retryAfterMs: 1_500, deniedBy: '', limits: [], delayMs: 0, source: 'fail_closed' });
    // Half of capacity 4: two grants, then a denial from the local bucket.
    const local = [await decide('local', down), await decide('local', down), await decide('local', down)];
    expect(local.map((d) => [d.allowed, d.source])).toEqual([
      [true, 'local'],
      [true, 'local'],
      [false, 'local'],
    ]);
  });

  it('a hung store costs the budget, not more, and counts as a timeout', async () => {
    const { decide, kinds } = setup();
    const started = performance.now();
    expect((await decide('open', hung)).source).toBe('fail_open');
    expect(performance.now() - started).toBeGreaterThanOrEqual(19);
    expect(kinds).toEqual(['timeout']);
  });

  it('consecutive failures open the circuit: the store is no longer asked, one warning for the whole outage', async () => {
    const { decide, kinds, lines, storeCalls } = setup();
    for (let i = 0; i < 10; i++) await decide('open', down);
    expect(storeCalls()).toBe(3);
    expect(kinds).toEqual([...Array(3).fill('error'), ...Array(7).fill('circuit_open')]);
    expect(lines.filter((l) => l.includes('"level":40'))).toHaveLength(1);
  });

  it('one breaker per partition (cluster shard): a dead shard opens its own circuit, the others keep deciding', async () => {
    const { decide, failure, lines } = setup();
    // Calls alternate between a dead shard and a healthy one, as under real load.
    const sources: string[] = [];
    for (let i = 0; i < 5; i++) {
      sources.push((await decide('closed', down, 'shard-a')).source, (await decide('closed', async () => STORE_DECISION, 'shard-b')).source);
    }
    expect(sources).toEqual(Array(5).fill(['fail_closed', 'store']).flat());
    expect(failure.circuitStates()).toEqual({ closed: 1, open: 1, half_open: 0 });
    expect(lines.filter((l) => l.includes('"level":40') && l.includes('"partition":"shard-a"'))).toHaveLength(1);
  });

  it('after the half-open delay one probe goes through; its success closes the circuit and says so once', async () => {
    const { decide, lines } = setup(30);
    for (let i = 0; i < 3; i++) await decide('open', down);
    await new Promise((r) => setTimeout(r, 40)); // the breaker's own clock: wait out its delay
    expect(await decide('open', async () => STORE_DECISION)).toMatchObject({ source: 'store' });
    expect(lines.filter((l) => l.includes('circuit closed'))).toHaveLength(1);
  });

  it('a script error is a bug, not an outage: it propagates and does not open the circuit', async () => {
    const { decide, kinds, storeCalls } = setup();
    const bug = () => Promise.reject(new Error('quotaTokenBucket: reply[0] is not an integer'));
    for (let i = 0; i < 5; i++) await expect(decide('open', bug)).rejects.toThrow(/reply\[0\]/);
    expect(storeCalls()).toBe(5);
    expect(kinds).toEqual([]);
  });
});
