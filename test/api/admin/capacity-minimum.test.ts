import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ClientError, createChannel, createClient, Metadata, Status } from 'nice-grpc';
import { afterAll, describe, expect, it } from 'vitest';
import { OverrideMatch, QuotaAdminServiceDefinition, QuotaServiceDefinition } from '@quota-service/contract';
import { ADMIN_TOKEN, writeAdminFixture } from '../../clients/quotactl/admin-fixture.js';
import { useServiceProcess } from '../../clients/quotactl/service.js';
import { type ServiceProcess, startServiceProcess } from '../../support/service-process.js';

/**
 * A bucket too small to grant a request of cost 1 (capacity 5e-324, or 0.5)
 * made every Allow of it fail as a cost that could never be granted. It is
 * refused where it is set: an override, the policy file with its plans (and
 * ValidatePolicies, which checks a file as the loader does), Envoy's rate
 * limit configuration. Real service processes with caller authentication.
 */
const fixture = writeAdminFixture();
const scratch = mkdtempSync(join(tmpdir(), 'capacity-minimum-'));
afterAll(() => {
  fixture.remove();
  rmSync(scratch, { recursive: true, force: true });
});
const service = useServiceProcess(() => fixture.env);
const options = { '*': { metadata: Metadata({ authorization: `Bearer ${ADMIN_TOKEN}` }) } };
const admin = () => createClient(QuotaAdminServiceDefinition, createChannel(service.address()), options);
const quota = () => createClient(QuotaServiceDefinition, createChannel(service.address()), options);

const MINIMUM = 'at least 1: a smaller bucket could never grant a request of cost 1 (the cost of a request that gives none)';

/** The status of a call that must fail. */
const failure = (call: Promise<unknown>) =>
  call.then(
    () => ({ code: Status.OK, details: '' }),
    (error: unknown) => ({ code: (error as ClientError).code, details: (error as ClientError).details }),
  );

/** Its exit code, once it exited; killed if it still runs after 10 s (the start should have been refused), so no process outlives the test. */
async function exitOf(started: ServiceProcess): Promise<number | null> {
  const timer = setTimeout(() => started.signal('SIGKILL'), 10_000);
  const code = await started.exit;
  clearTimeout(timer);
  return code;
}

describe('SetOverride', () => {
  const override = (customer: string, capacity: number) =>
    admin().setOverride({
      key: { limit: 'api', match: OverrideMatch.OVERRIDE_MATCH_EXACT, value: customer },
      parameters: { tokenBucket: { capacity, refillPerSecond: 0 } },
      ttlMs: 60_000,
      reason: 'capacity minimum test',
    });

  it.each([5e-324, 0.5, 0.999999])('capacity %s: INVALID_ARGUMENT naming the field; the customer is still counted by the limit', async (capacity) => {
    expect(await failure(override(`tiny-${capacity}`, capacity))).toEqual({
      code: Status.INVALID_ARGUMENT,
      details: `parameters.token_bucket.capacity: ${MINIMUM}`,
    });
    const answer = await quota().allow({ policy: 'api', identity: { customer: `tiny-${capacity}` } });
    expect(answer).toMatchObject({ allowed: true, limits: [{ name: 'api', limit: 5 }] });
  });

  it('capacity 1: set, and the customer gets one request, then a denial (not an error)', async () => {
    await override('one', 1);
    const ask = () => quota().allow({ policy: 'api', identity: { customer: 'one' } });
    expect(await ask()).toMatchObject({ allowed: true, limits: [{ limit: 1 }] });
    expect(await ask()).toMatchObject({ allowed: false, deniedBy: 'api' });
  });
});

describe('policy files', () => {
  const limit = (parameters: string) => `policies:\n  p:\n    limits:\n      - { name: l, key_by: user, ${parameters} }\n`;

  it.each([
    ['a token bucket', limit('algorithm: token_bucket, capacity: 5e-324, refill_per_second: 1'), 'policies.p.limits[0].capacity'],
    ['a leaky bucket', limit('algorithm: leaky_bucket, capacity: 0.5, leak_per_second: 1'), 'policies.p.limits[0].capacity'],
    ['a gcra limit', limit('algorithm: gcra, capacity: 1e-9, refill_per_second: 1'), 'policies.p.limits[0].capacity'],
    [
      'a plan',
      limit('algorithm: token_bucket, capacity: 5, refill_per_second: 1, plan_by: plan, plans: { free: { capacity: 0.5 } }'),
      'policies.p.limits[0].plans.free.capacity',
    ],
  ])('%s too small: ValidatePolicies answers valid false naming the field', async (_name, text, field) => {
    const answer = await admin().validatePolicies({ text, source: 'tiny.yaml' });
    expect(answer).toEqual({ valid: false, message: `tiny.yaml: invalid policies:\n  ${field}: ${MINIMUM}`, policies: [] });
  });

  it('the service does not start on a policy file with a capacity of 5e-324, naming the field', async () => {
    const path = join(scratch, 'policies.yaml');
    writeFileSync(path, limit('algorithm: token_bucket, capacity: 5e-324, refill_per_second: 1'));
    const started = startServiceProcess({ QUOTA_POLICIES: path });
    expect(await exitOf(started)).toBe(1);
    expect(started.output().stderr).toBe(`quota-service: ${path}: invalid policies:\n  policies.p.limits[0].capacity: ${MINIMUM}\n`);
  });

  it("the service does not start on Envoy's rate limit configuration with a capacity of 5e-324 or a refill of 5e-324", async () => {
    for (const [parameters, field, reason] of [
      ['capacity: 5e-324, refill_per_second: 1', 'capacity', MINIMUM],
      ['capacity: 1, refill_per_second: 5e-324', 'refill_per_second', 'capacity / refill_per_second is too large'],
    ]) {
      const path = join(scratch, 'edge.yaml');
      writeFileSync(path, `domain: edge\ndescriptors:\n  - key: user\n    limit: { algorithm: token_bucket, ${parameters} }\n`);
      const started = startServiceProcess({ QUOTA_RLS_CONFIG: path });
      expect(await exitOf(started)).toBe(1);
      expect(started.output().stderr).toContain(`edge.yaml: domain "edge": descriptor "user" (descriptors[0]) limit.${field}: ${reason}`);
    }
  });
});
