import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decideTokenBucket, type TokenBucketState } from '../clients/core/src/algorithms/token-bucket/model.js';
import { parsePolicies } from '@quota-service/core';
import { startTestService, type TestService } from './support/quota-service.js';
import { redisFixture, T0, type StoreFixture } from './support/store-fixtures.js';
import { useRedisServer } from './support/use-redis.js';

/**
 * One tenant flooding the service does not change another
 * tenant's decisions. The quiet tenant's sequence of decisions is the same
 * with and without the flood, and equals the token bucket model's. Virtual
 * time (the test clock reaches the scripts) makes every decision exact.
 */
const CAPACITY = 5;
const RATE_PER_SECOND = 2;
const STEPS = 40;
const STEP_MS = 150;
const FLOOD_PER_STEP = 50;

const policies = parsePolicies(
  'policies:\n  api:\n    limits:\n' +
    `      - { name: api-tenant, key_by: tenant, algorithm: token_bucket, capacity: ${CAPACITY}, refill_per_second: ${RATE_PER_SECOND} }\n`,
);

interface Decision {
  allowed: boolean;
  retryAfterMs: number;
  remaining: number;
}

function modelDecisions(): Decision[] {
  let state: TokenBucketState | undefined;
  const decisions: Decision[] = [];
  for (let i = 0; i < STEPS; i++) {
    const step = decideTokenBucket(state, { capacity: CAPACITY, refillPerSecond: RATE_PER_SECOND }, 1, T0 + i * STEP_MS);
    // The token bucket stores its refill on a denial too.
    state = step.state;
    decisions.push({ allowed: step.outcome.allowed, retryAfterMs: step.outcome.retryAfterMs, remaining: step.outcome.remaining });
  }
  return decisions;
}

const redis = useRedisServer();
let fixture: StoreFixture;
let service: TestService;

beforeAll(async () => {
  fixture = redisFixture(redis());
  service = await startTestService(fixture.store, policies);
});
afterAll(async () => {
  await service?.stop();
  await fixture?.store.close();
});

/** The quiet tenant's decisions over the schedule, with `flood` calls of the noisy tenant around each one. */
async function run(flood: number): Promise<{ quiet: Decision[]; noisyAllowed: number; noisyDenied: number }> {
  await fixture.reset();
  const quiet: Decision[] = [];
  let noisyAllowed = 0;
  let noisyDenied = 0;
  for (let i = 0; i < STEPS; i++) {
    fixture.clock.set(T0 + i * STEP_MS);
    const noisy = Array.from({ length: flood }, (_, j) =>
      service.client.allow({ policy: 'api', identity: { tenant: 'noisy', user: `bot-${j}` } }).then((r) => (r.allowed ? noisyAllowed++ : noisyDenied++)),
    );
    // The quiet call goes out in the middle of the flood, on the same connection and the same Redis.
    const half = Math.floor(flood / 2);
    const [response] = await Promise.all([
      service.client.allow({ policy: 'api', identity: { tenant: 'quiet', user: 'alice' } }),
      ...noisy.slice(0, half),
      ...noisy.slice(half),
    ]);
    const limit = response.limits[0]!;
    quiet.push({ allowed: response.allowed, retryAfterMs: Number(response.retryAfterMs), remaining: Number(limit.remaining) });
  }
  return { quiet, noisyAllowed, noisyDenied };
}

describe('fairness between tenants', () => {
  it('a flooding tenant leaves the quiet tenant with the same decisions as without the flood, which are the model’s', async () => {
    const expected = modelDecisions();
    // The schedule asks faster than the refill: the quiet tenant sees denials of its own, not only allows.
    expect(expected.some((d) => !d.allowed)).toBe(true);
    expect(expected.filter((d) => d.allowed).length).toBeGreaterThan(CAPACITY);

    const alone = await run(0);
    const flooded = await run(FLOOD_PER_STEP);

    expect(alone.quiet).toEqual(expected);
    expect(flooded.quiet).toEqual(expected);
    // The flood was real: it reached the store and its own bucket denied almost all of it.
    expect(flooded.noisyAllowed + flooded.noisyDenied).toBe(STEPS * FLOOD_PER_STEP);
    expect(flooded.noisyDenied).toBeGreaterThan(flooded.noisyAllowed * 10);
  });
});
