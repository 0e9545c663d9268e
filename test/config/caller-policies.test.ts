// A callers file that lets a caller use a policy the policy file does not define:
// the service starts and serves, and warns naming the caller and the policy, at
// start and after a reload of either file (a policy may disappear later). A name
// no policy can have is refused like any other malformed field.
import { ClientError, createChannel, createClient, Metadata, Status } from 'nice-grpc';
import { afterAll, describe, expect, it } from 'vitest';
import { QuotaServiceDefinition } from '@quota-service/contract';
import { parseCallers } from '../../src/config/callers.js';
import { ConfigMapVolume } from '../support/configmap-volume.js';
import { startServiceProcess, untilServing, type ServiceProcess } from '../support/service-process.js';

const ORDER_API_TOKEN = 'order-api-token-0123456789abcdef';
const BILLING_TOKEN = 'billing-token-fedcba9876543210';

const limit = (name: string) => `    limits: [{ name: ${name}, key_by: user, algorithm: fixed_window, limit: 5, window: minute }]\n`;
const policyFile = (names: string[]) => `policies:\n${names.map((name) => `  ${name}:\n${limit(name)}`).join('')}`;
const callersFile = (orderApi: string[], billing: string[]) =>
  `callers:\n  order-api: { token: ${ORDER_API_TOKEN}, policies: [${orderApi.join(', ')}] }\n  billing: { token: ${BILLING_TOKEN}, policies: [${billing.join(', ')}] }\n  gateway: { token: gateway-token-00112233445566, policies: ['*'] }\n`;

let service: ServiceProcess | undefined;
const policies = new ConfigMapVolume(policyFile(['orders', 'invoices', 'refunds']), 'policies.yaml');
const callers = new ConfigMapVolume(callersFile(['orders', 'oders'], ['invoices', 'refunds']), 'callers.yaml');
afterAll(() => {
  service?.signal('SIGKILL');
  policies.remove();
  callers.remove();
});

/** The parsed warning lines about callers, by the moment of the check. */
const warnings = (stdout: string, after: string) =>
  stdout
    .split('\n')
    .filter((line) => line.includes('"unknownPolicies"') && line.includes(`"after":"${after}"`))
    .map((line) => JSON.parse(line) as { level: number; caller: string; unknownPolicies: string[]; msg: string });

describe('callers allowed policies that do not exist, on a real service process', () => {
  it('warns at start and after either file reloads, naming caller and policy; the service keeps serving', async () => {
    service = startServiceProcess({ QUOTA_AUTH_TOKENS: callers.file, QUOTA_POLICIES: policies.file });
    const channel = createChannel(`127.0.0.1:${await service.port}`);
    await untilServing(channel);
    const client = createClient(QuotaServiceDefinition, channel);
    const allow = (token: string, policy: string) =>
      client.allow({ policy, identity: { user: 'u1' } }, { metadata: Metadata({ authorization: `Bearer ${token}` }) }).then(
        (response) => (response.allowed ? 'allowed' : 'denied'),
        (error: unknown) => (error instanceof ClientError ? Status[error.code] : String(error)),
      );

    // At start: one warning, for order-api's typo; billing and the '*' caller are fine.
    expect(warnings(service.output().stdout, 'start')).toEqual([
      expect.objectContaining({
        level: 40,
        caller: 'order-api',
        unknownPolicies: ['oders'],
        msg: 'caller order-api may use a policy the policy file does not define (oders): its calls naming it get NOT_FOUND',
      }),
    ]);
    expect(await allow(ORDER_API_TOKEN, 'orders')).toBe('allowed');
    expect(await allow(ORDER_API_TOKEN, 'oders')).toBe('NOT_FOUND');

    // The callers file fixes the typo and gives billing a policy that is not there yet.
    callers.update(callersFile(['orders'], ['invoices', 'refunds', 'payouts']));
    await service.logged(/"msg":"callers reloaded"/);
    expect(warnings(service.output().stdout, 'callers reloaded')).toEqual([
      expect.objectContaining({ level: 40, caller: 'billing', unknownPolicies: ['payouts'] }),
    ]);

    // The policy file, reloaded on its own: payouts arrives, refunds disappears.
    policies.update(policyFile(['orders', 'invoices', 'payouts']));
    await service.logged(/"msg":"policies reloaded"/);
    expect(warnings(service.output().stdout, 'policies reloaded')).toEqual([
      expect.objectContaining({
        level: 40,
        caller: 'billing',
        unknownPolicies: ['refunds'],
        msg: 'caller billing may use a policy the policy file does not define (refunds): its calls naming it get NOT_FOUND',
      }),
    ]);
    expect(await allow(BILLING_TOKEN, 'payouts')).toBe('allowed');

    // refunds comes back: one line says all is well again.
    policies.update(policyFile(['orders', 'invoices', 'payouts', 'refunds']));
    expect(await service.logged(/"msg":"every policy the callers file names is now defined"/)).toContain('"after":"policies reloaded"');
    expect(await service.logged(/"msg":"policies reloaded"/, 2)).toBeDefined();
    expect(service.output().stdout.match(/"unknownPolicies"/g)).toHaveLength(3);

    channel.close();
    service.signal('SIGTERM');
    expect(await service.exit).toBe(0);
  });
});

describe('a callers file naming something no policy can be called', () => {
  it.each([['Orders'], ['orders/create'], [' orders']])('%j is refused, naming the caller and the field', (entry) => {
    expect(() => parseCallers(`callers:\n  order-api: { token: ${ORDER_API_TOKEN}, policies: [orders, ${JSON.stringify(entry)}] }\n`)).toThrow(
      /the 1st caller \(line 2, name sha256 45286570\): policies\.1: not a policy name \(1-64 lowercase letters, digits, "_", "\." or "-", starting with a letter or digit\) nor "\*"/,
    );
  });
});
