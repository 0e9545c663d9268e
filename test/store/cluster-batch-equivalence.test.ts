import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { type AllowInput, type Decision, identityKey, limitCalls, parsePolicies, validateRequest } from '@quota-service/core';
import { type Answer, answerOf, comparable, type Sides, useSides } from '../support/cluster-sides.js';
import { T0 } from '../support/store-fixtures.js';
import { useRedisCluster } from '../support/use-redis.js';

/**
 * Batched on a Redis Cluster (one node batch per master and turn, cross-slot
 * requests in phases) = one by one on a cluster = the model, for every
 * algorithm and for a user + tenant policy, batches spanning every master.
 *
 * Two clusters, so each side has its own state: `batched` decides every
 * step's requests with one allowEach (an AllowBatch), `oneByOne` the same
 * requests with one allow each, in order, with batching off; the model is the
 * embedded store. All three on the same virtual clock. Limits live 5 s or
 * more and virtual time keeps clear of the last 5 s of a minute, so Redis's
 * own expiry (real time) never lapses mid-sequence (as in
 * cluster-equivalence.test.ts).
 */
const ALGORITHMS: Record<string, unknown>[] = [
  { name: 'tb', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 },
  { name: 'fw', key_by: 'user', algorithm: 'fixed_window', limit: 5, window: 'minute' },
  { name: 'swl', key_by: 'user', algorithm: 'sliding_window_log', limit: 8, window: 'minute' },
  { name: 'swc', key_by: 'user', algorithm: 'sliding_window_counter', limit: 8, window: 'minute' },
  { name: 'lb-police', key_by: 'user', algorithm: 'leaky_bucket', capacity: 5, leak_per_second: 0.5, mode: 'policing' },
  { name: 'lb-shape', key_by: 'user', algorithm: 'leaky_bucket', capacity: 5, leak_per_second: 0.5, mode: 'shaping' },
  { name: 'gcra', key_by: 'user', algorithm: 'gcra', capacity: 10, refill_per_second: 2 },
  // Leases, acquired by request id (below). A remembered decision lives on Redis's real clock
  // (PX), so it is kept for a day: longer than any sequence's virtual time, on both sides.
  { name: 'conc', key_by: 'user', algorithm: 'concurrency', limit: 3, lease_ttl_ms: 20_000 },
];
/** The policies whose requests carry a request id: their limits hold a lease per request id. */
const WITH_REQUEST_ID = new Set(['p-conc']);
/**
 * The orders.create shape: user bucket and per-minute window (one slot), the
 * tenant's window (another). The bucket refills 1000 / 512 per second, an
 * exact binary fraction, so a refunded balance is bit for bit the untouched one.
 */
const MULTI = [
  { name: 'm-bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 6, refill_per_second: 1.953125 },
  { name: 'm-user', key_by: 'user', algorithm: 'fixed_window', limit: 4, window: 'minute' },
  { name: 'm-tenant', key_by: 'tenant', algorithm: 'fixed_window', limit: 9, window: 'minute' },
];
const policies = parsePolicies(
  stringify({
    policies: {
      ...Object.fromEntries(
        ALGORITHMS.map((limit) => [
          `p-${limit.name as string}`,
          WITH_REQUEST_ID.has(`p-${limit.name as string}`) ? { limits: [limit], request_id_ttl_ms: 86_400_000 } : { limits: [limit] },
        ]),
      ),
      multi: { limits: MULTI },
    },
  }),
);
const singleLimitPolicies = ALGORITHMS.map((limit) => `p-${limit.name as string}`);

/** a, b and c hash to three different masters (a: 15495, b: 3300, c: 7365); the others land anywhere. */
const USERS = ['a', 'b', 'c', 'd', 'e', 'f', 'a:b', '{x}', '}{'];
const TENANTS = ['a', 't1', 't2', 't3', '{x}', 'acme'];

/** Whole costs from 1 up to the policy's smallest capacity. */
function costOf(policy: string, share: number): number {
  if (share < 0.4) return 1;
  const limits = policies.get(policy)!.limits;
  let capacity = Number.POSITIVE_INFINITY;
  for (const limit of limits) capacity = Math.min(capacity, limit.algorithm.capacity(limit.params));
  return Math.max(1, Math.floor(share * capacity));
}

/** Keeps virtual time out of the last 5 s of a minute (see above). */
function clearOfRealExpiry(now: number): number {
  return now % 60_000 > 55_000 ? now - (now % 60_000) + 60_000 : now;
}

const timeStep = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 5_000 }), fc.integer({ min: 0, max: 600_000 }));

/** Answers seen by runSteps, so a test can tell it decided both ways. */
const tally = { allowed: 0, denied: 0 };

/** Runs each step's requests on the three sides and requires the same answers. */
async function runSteps(sides: Sides, start: number, steps: readonly { dt: number; requests: AllowInput[] }[]): Promise<void> {
  await sides.reset();
  let now = clearOfRealExpiry(start);
  for (const [i, { dt, requests }] of steps.entries()) {
    now = clearOfRealExpiry(now + dt);
    sides.clock.set(now);
    const batched = (await sides.batched.allowEach(requests, (decision) => decision)).map(answerOf);
    const oneByOne: Answer[] = [];
    const model: Answer[] = [];
    for (const request of requests) {
      oneByOne.push(
        await sides.oneByOne.allow(request).then(
          (d) => comparable(d) as Answer,
          (e: Error) => ({ error: e.message }),
        ),
      );
      model.push(
        await sides.model.allow(request).then(
          (d) => comparable(d) as Answer,
          (e: Error) => ({ error: e.message }),
        ),
      );
    }
    const context = `step ${i} at +${now - start} ms: ${JSON.stringify(requests.map((r) => [r.policy, r.identity, r.cost]))}`;
    expect(oneByOne, `one by one, ${context}`).toEqual(model);
    expect(batched, `batched, ${context}`).toEqual(model);
    for (const answer of model) tally[(answer as Decision).allowed ? 'allowed' : 'denied']++;
  }
}

/** The masters that own the users' slots in a batch: at least two, so a batch spans masters. */
const SLOT_OWNER_OF_USER: Record<string, number> = { a: 2, b: 0, c: 1 };

describe('batched on a cluster = one by one on a cluster = the model', () => {
  const sides = useSides(policies);

  it.each(singleLimitPolicies)(
    '%s: random batches (an identity may come back within a batch), each decided as if alone and in order',
    async (policy) => {
      const leases = WITH_REQUEST_ID.has(policy);
      // Few identities and large batches: limits run out within a sequence, and within a batch.
      const requestId = leases ? fc.constantFrom('r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r:7') : fc.constant('');
      const request = fc.record({ user: fc.constantFrom('a', 'b', 'c', 'a:b', '{x}'), share: fc.double({ min: 0, max: 1, noNaN: true }), requestId });
      const step = fc.record({ dt: timeStep, requests: fc.array(request, { minLength: 1, maxLength: 40, size: 'max' }) });
      // Every sequence opens with a batch on fresh state that spans every master and runs a limit
      // out: user a asks for the whole capacity four times (leases: four new request ids, one over
      // the limit of 3), so its first request is granted and its last denied, whatever the draw.
      const opening = fc.record({
        dt: fc.constant(0),
        requests: fc
          .tuple(request, request)
          .map(([b, c]) => [
            ...[0, 1, 2, 3].map((i) => ({ user: 'a', share: 1, requestId: leases ? `opening-${i}` : '' })),
            { ...b, user: 'b' },
            { ...c, user: 'c' },
          ]),
      });
      let sequences = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 0, max: 4_102_444_800_000 }),
          opening,
          fc.array(step, { minLength: 0, maxLength: 7, size: 'max' }),
          async (start, first, rest) => {
            const runs = [first, ...rest].map(({ dt, requests }) => ({
              dt,
              requests: requests.map(({ user, share, requestId }) => ({ policy, identity: { user }, cost: costOf(policy, share), requestId })),
            }));
            Object.assign(tally, { allowed: 0, denied: 0 });
            await runSteps(sides(), start, runs);
            const spanning = runs.filter(({ requests }) => new Set(requests.map((r) => SLOT_OWNER_OF_USER[r.identity.user!])).size >= 3).length;
            expect(spanning, 'batches spanning every master').toBeGreaterThanOrEqual(1);
            // Both ways in every sequence: granted and denied.
            expect(tally.allowed, 'granted').toBeGreaterThan(0);
            expect(tally.denied, 'denied').toBeGreaterThan(0);
            // One script call per master per batch at most (a lone call is one too): batched, not one per request.
            expect(await sides().batchedScriptCalls()).toBeLessThanOrEqual(3 * runs.length);
            sequences++;
          },
        ),
        // The default (random) seed: fast-check prints the seed of a failing run.
        { numRuns: 25 },
      );
      expect(sequences).toBeGreaterThanOrEqual(25);
    },
    300_000,
  );

  it('user + tenant (two slots): batches whose requests share no state, reserve and refund in phases', async () => {
    const request = fc.record({ user: fc.constantFrom(...USERS), tenant: fc.constantFrom(...TENANTS), cost: fc.integer({ min: 1, max: 3 }) });
    // Within a batch no user and no tenant twice (requests that share a key see each other's reservations,
    // as concurrent requests do: tested below); across batches they come back and run state down.
    const batch = fc
      .uniqueArray(request, { minLength: 1, maxLength: 6, selector: (r) => r.user })
      .filter((requests) => new Set(requests.map((r) => r.tenant)).size === requests.length);
    // Mostly within one window, so that the users' and tenants' limits run down across batches and both
    // answers come often; now and then minutes later, every window new.
    const soon = fc.oneof(
      { weight: 3, arbitrary: fc.constant(0) },
      { weight: 3, arbitrary: fc.integer({ min: 0, max: 50 }) },
      { weight: 3, arbitrary: fc.integer({ min: 0, max: 5_000 }) },
      { weight: 1, arbitrary: fc.integer({ min: 0, max: 600_000 }) },
    );
    const step = fc.record({ dt: soon, requests: batch });
    // Every sequence opens with a batch whose users a, b and c sit on the three masters, each with another tenant.
    const opening = fc.record({
      dt: fc.constant(0),
      requests: fc
        .tuple(fc.shuffledSubarray(TENANTS, { minLength: 3, maxLength: 3 }), fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 3, maxLength: 3 }))
        .map(([tenants, costs]) => ['a', 'b', 'c'].map((user, i) => ({ user, tenant: tenants[i]!, cost: costs[i]! }))),
    });
    /** The masters a request's two slots (user, tenant) are on. */
    const mastersOf = (identity: { user?: string; tenant?: string }) => [
      sides().masterOf(identityKey('m-user', 'user', identity.user!)),
      sides().masterOf(identityKey('m-tenant', 'tenant', identity.tenant!)),
    ];
    let spanningEveryMaster = 0;
    Object.assign(tally, { allowed: 0, denied: 0 });
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 4_102_444_800_000 }), opening, fc.array(step, { minLength: 0, maxLength: 11 }), async (start, first, rest) => {
        const runs = [first, ...rest].map(({ dt, requests }) => ({
          dt,
          requests: requests.map(({ user, tenant, cost }) => ({ policy: 'multi', identity: { user, tenant }, cost, requestId: '' })),
        }));
        await runSteps(sides(), start, runs);
        const spanning = runs.filter(({ requests }) => new Set(requests.flatMap((r) => mastersOf(r.identity))).size === 3).length;
        expect(spanning, 'batches spanning every master').toBeGreaterThanOrEqual(1);
        spanningEveryMaster += spanning;
        // Two phases (and refunds) of a batch: at most one script call per master each.
        expect(await sides().batchedScriptCalls()).toBeLessThanOrEqual(3 * 3 * runs.length);
      }),
      { numRuns: 60 },
    );
    expect(spanningEveryMaster).toBeGreaterThanOrEqual(60);
    expect(tally.denied).toBeGreaterThan(tally.allowed / 10);
    expect(tally.allowed).toBeGreaterThan(tally.denied / 10);
  }, 300_000);

  it('user + tenant, requests sharing users and tenants within a batch: all or nothing, never more than the limits allow', async () => {
    // Contended batches: a request may be denied for another's reservation, as concurrent
    // requests may. What must hold: the requests granted, spent in order on the model from the
    // same state, are all granted there too, and leave every limit exactly as the cluster has it
    // (denied requests spent nothing, refunds gave back exactly, nothing was spent twice).
    const request = fc.record({ user: fc.constantFrom('a', 'b', 'c'), tenant: fc.constantFrom('t1', 'a'), cost: fc.integer({ min: 1, max: 3 }) });
    const step = fc.record({ dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3_000 })), requests: fc.array(request, { minLength: 1, maxLength: 20 }) });
    const s = sides();
    let granted = 0;
    let denied = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 10 }), async (steps) => {
        await s.reset();
        let now = clearOfRealExpiry(T0);
        for (const [i, { dt, requests }] of steps.entries()) {
          now = clearOfRealExpiry(now + dt);
          s.clock.set(now);
          const inputs = requests.map(({ user, tenant, cost }) => ({ policy: 'multi', identity: { user, tenant }, cost, requestId: '' }));
          const answers = (await s.batched.allowEach(inputs, (decision) => decision)).map(answerOf);
          for (const [j, answer] of answers.entries()) {
            expect(answer, `step ${i} request ${j}`).not.toHaveProperty('error');
            if (!(answer as Decision).allowed) {
              denied++;
              continue;
            }
            granted++;
            // The model spends the granted request in full.
            const replayed = await s.model.allow(inputs[j]!);
            expect(replayed.allowed, `step ${i}: request ${j} was granted on the cluster but does not fit the limits`).toBe(true);
          }
          for (const user of ['a', 'b', 'c']) {
            for (const tenant of ['t1', 'a']) {
              const identity = { user, tenant };
              const [onCluster, inModel] = await Promise.all([
                s.batched.getQuota({ policy: 'multi', identity }),
                s.model.getQuota({ policy: 'multi', identity }),
              ]);
              expect(onCluster, `step ${i}, limits of ${JSON.stringify(identity)}`).toEqual(inModel);
            }
          }
        }
      }),
      { numRuns: 40 },
    );
    expect(granted).toBeGreaterThan(0);
    expect(denied).toBeGreaterThan(0);
  }, 300_000);
});

/** Guards against a test that passes vacuously: the users above do land on three masters. */
describe('the identities used above', () => {
  const cluster = useRedisCluster();
  it('a, b and c are on three different masters', async () => {
    const owners = await Promise.all(['a', 'b', 'c'].map((user) => cluster().ownerOf(`{${user}}`)));
    expect(new Set(owners).size).toBe(3);
    const { shards } = await cluster().topology();
    for (const [user, shard] of Object.entries(SLOT_OWNER_OF_USER)) expect(owners[['a', 'b', 'c'].indexOf(user)]).toBe(shards[shard]!.masterPort);
    // Every request is a valid request (limitCalls would throw otherwise).
    for (const policy of [...singleLimitPolicies, 'multi']) {
      const request = validateRequest(policies, { policy, identity: { user: 'a', tenant: 't1' }, cost: 1, requestId: WITH_REQUEST_ID.has(policy) ? 'r1' : '' });
      expect(limitCalls(request.policy.limits, request).length).toBeGreaterThan(0);
    }
  });
});
