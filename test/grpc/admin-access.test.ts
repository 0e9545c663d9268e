import { networkInterfaces } from 'node:os';
import { createChannel, createClient } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QuotaAdminServiceDefinition, QuotaServiceDefinition } from '@quota-service/contract';
import { isLoopback } from '../../src/api/admin/admin-access.js';
import { tokenSha256 } from '../../src/config/callers.js';
import type { QuotaServer } from '../../src/quota-server.js';
import {
  auditLines,
  auditOf,
  CALLERS,
  loopbackClients,
  NARROW_ADMIN_TOKEN,
  ORDER_API_TOKEN,
  POLICIES,
  setRequest,
  startAdminServer,
  SUPPORT_TOKEN,
} from '../support/admin-grpc-fixture.js';
import { bearer, codeOf } from '../support/grpc-calls.js';

/**
 * Who may call the admin API over gRPC, wired as src/main.ts wires it: refused
 * without the admin role, or for a policy outside an admin's list (or, without
 * caller authentication, from anywhere but loopback), and every call, refused
 * or not, one audit line. What the calls do: admin-operations.test.ts.
 */
describe('admin API with caller authentication', () => {
  let server: QuotaServer;
  const lines: string[] = [];
  let admin: ReturnType<typeof loopbackClients>['admin'];
  beforeAll(async () => {
    server = await startAdminServer({ callers: CALLERS, lines });
    ({ admin } = loopbackClients(server));
  });
  afterAll(async () => {
    await server?.shutdown(1_000);
  });

  it('refuses every admin call without the admin role (PERMISSION_DENIED) or without a token (UNAUTHENTICATED), each refusal one audit line', async () => {
    const calls: [string, () => Promise<unknown>][] = [
      ['ResetQuota', () => admin.resetQuota({ policy: 'orders', identity: { user: '42' } }, bearer(ORDER_API_TOKEN))],
      ['SetOverride', () => admin.setOverride(setRequest('42'), bearer(ORDER_API_TOKEN))],
      ['GetOverride', () => admin.getOverride({ key: setRequest('42').key }, bearer(ORDER_API_TOKEN))],
      ['ListOverrides', () => admin.listOverrides({}, bearer(ORDER_API_TOKEN))],
      ['DeleteOverride', () => admin.deleteOverride({ key: setRequest('42').key }, bearer(ORDER_API_TOKEN))],
      ['ValidatePolicies', () => admin.validatePolicies({ text: POLICIES }, bearer(ORDER_API_TOKEN))],
    ];
    for (const [method, call] of calls) {
      expect(await codeOf(call())).toBe('PERMISSION_DENIED');
      expect(await auditOf(lines, call)).toEqual([
        expect.objectContaining({
          level: 40,
          method,
          caller: 'order-api',
          peer: expect.stringContaining('127.0.0.1'),
          outcome: 'refused',
          code: 'PERMISSION_DENIED',
          why: expect.stringMatching(/^caller "order-api" may not use the admin API/),
        }),
      ]);
    }
    await expect(admin.setOverride(setRequest('42'), bearer(ORDER_API_TOKEN))).rejects.toThrow(/caller "order-api" may not use the admin API/);
    // Who tried what, without the value: its digest.
    const [reset] = await auditOf(lines, calls[0]![1]);
    expect(reset).toMatchObject({ audit: 'reset', target: { policy: 'orders', identity: { user: expect.stringMatching(/^[0-9a-f]{16}$/) }, limits: [] } });
    // Without a token, or with an unknown one: the caller is unnamed, the peer says where the call came from.
    const unknownToken = 'not-a-known-token-5e5e5e5e5e5e5e5e';
    for (const options of [{}, bearer(unknownToken)]) {
      expect(await codeOf(admin.listOverrides({}, options))).toBe('UNAUTHENTICATED');
      expect(await auditOf(lines, () => admin.listOverrides({ limit: 'orders' }, options))).toEqual([
        expect.objectContaining({
          audit: 'override.list',
          method: 'ListOverrides',
          caller: null,
          peer: expect.stringContaining('127.0.0.1'),
          outcome: 'refused',
          code: 'UNAUTHENTICATED',
          target: { limit: 'orders' },
        }),
      ]);
    }
    expect(lines.join('\n')).not.toContain(unknownToken);
    // Nothing was written.
    expect((await admin.listOverrides({}, bearer(SUPPORT_TOKEN))).overrides).toEqual([]);
  });

  it('every call an admin makes is one audit line: reads, refusals for bad input and NOT_FOUND too', async () => {
    const key = setRequest('reader-1').key;
    const one = async (call: () => Promise<unknown>) => {
      const found = await auditOf(lines, call);
      expect(found).toHaveLength(1);
      return found[0]!;
    };
    expect(await one(() => admin.getOverride({ key }, bearer(SUPPORT_TOKEN)))).toMatchObject({
      level: 40,
      audit: 'override.get',
      caller: 'support',
      outcome: 'refused',
      code: 'NOT_FOUND',
      why: 'no exact override of limit "orders" for that value',
      target: { limit: 'orders', match: 'exact', valueSha256: expect.stringMatching(/^[0-9a-f]{16}$/) },
    });
    expect(await one(() => admin.deleteOverride({ key }, bearer(SUPPORT_TOKEN)))).toMatchObject({
      audit: 'override.delete',
      outcome: 'refused',
      code: 'NOT_FOUND',
    });
    await admin.setOverride(setRequest('reader-1'), bearer(SUPPORT_TOKEN));
    expect(await one(() => admin.getOverride({ key }, bearer(SUPPORT_TOKEN)))).toMatchObject({
      level: 30,
      audit: 'override.get',
      method: 'GetOverride',
      caller: 'support',
      outcome: 'ok',
    });
    expect(await one(() => admin.listOverrides({}, bearer(SUPPORT_TOKEN)))).toMatchObject({ audit: 'override.list', outcome: 'ok', target: { limit: '' } });
    expect(await one(() => admin.validatePolicies({ text: POLICIES, source: 'next.yaml' }, bearer(SUPPORT_TOKEN)))).toMatchObject({
      audit: 'policies.validate',
      outcome: 'ok',
      target: { source: 'next.yaml', chars: POLICIES.length },
    });
    // Bad input: refused naming the field, nothing changed, so no before or after.
    const bad = await one(() => admin.setOverride({ ...setRequest('reader-1'), ttlMs: -1 }, bearer(SUPPORT_TOKEN)));
    expect(bad).toMatchObject({ audit: 'override.set', outcome: 'refused', code: 'INVALID_ARGUMENT', why: expect.stringMatching(/^ttl_ms: /) });
    expect(bad).not.toHaveProperty('after');
    expect(await one(() => admin.resetQuota({ policy: 'orders', identity: {} }, bearer(SUPPORT_TOKEN)))).toMatchObject({
      audit: 'reset',
      outcome: 'refused',
      code: 'INVALID_ARGUMENT',
      target: { policy: 'orders', identity: {} },
    });
    // An admin the auth middleware refuses for a policy outside its list.
    expect(await one(() => admin.resetQuota({ policy: 'api', identity: { tenant: 'x' } }, bearer(NARROW_ADMIN_TOKEN)))).toMatchObject({
      audit: 'reset',
      caller: 'narrow-admin',
      outcome: 'refused',
      code: 'PERMISSION_DENIED',
      target: { policy: 'api' },
    });
    await admin.deleteOverride({ key }, bearer(SUPPORT_TOKEN));
    const all = lines.join('\n');
    for (const secret of ['reader-1', SUPPORT_TOKEN, NARROW_ADMIN_TOKEN, tokenSha256(SUPPORT_TOKEN)]) expect(all).not.toContain(secret);
  });

  it('an admin limited to some policies may reset only those', async () => {
    expect(await codeOf(admin.resetQuota({ policy: 'orders', identity: { user: 'x' } }, bearer(NARROW_ADMIN_TOKEN)))).toBe('OK');
    expect(await codeOf(admin.resetQuota({ policy: 'api', identity: { tenant: 'x' } }, bearer(NARROW_ADMIN_TOKEN)))).toBe('PERMISSION_DENIED');
  });
});

describe('admin API without caller authentication: loopback only', () => {
  const outside = Object.values(networkInterfaces())
    .flat()
    .find((i) => i !== undefined && i.family === 'IPv4' && !i.internal)?.address;
  let server: QuotaServer;
  const lines: string[] = [];
  beforeAll(async () => {
    server = await startAdminServer({ address: '0.0.0.0:0', lines });
  });
  afterAll(async () => {
    await server?.shutdown(1_000);
  });

  it('accepts a loopback client, recorded as "loopback"', async () => {
    const admin = createClient(QuotaAdminServiceDefinition, createChannel(`127.0.0.1:${server.port}`));
    const { current } = await admin.setOverride(setRequest('dev'));
    expect(current!.setBy).toBe('loopback');
    expect(auditLines(lines).find((l) => l.audit === 'override.set')).toMatchObject({ caller: 'loopback', peer: expect.stringContaining('127.0.0.1') });
  });

  it('refuses a client on another address, and says why', async () => {
    // The machine's own non-loopback address: the call arrives from it, not from 127.0.0.1.
    expect(outside, 'a non-loopback IPv4 interface').toBeDefined();
    const admin = createClient(QuotaAdminServiceDefinition, createChannel(`${outside}:${server.port}`));
    await expect(admin.listOverrides({})).rejects.toThrow(/PERMISSION_DENIED.*only loopback clients/s);
    expect(auditLines(lines).filter((l) => l.outcome === 'refused')).toEqual([
      expect.objectContaining({
        caller: null,
        peer: expect.stringContaining(outside!),
        code: 'PERMISSION_DENIED',
        why: expect.stringContaining('only loopback clients'),
        method: 'ListOverrides',
      }),
    ]);
    // The quota API itself stays open to it (no caller authentication configured).
    const quota = createClient(QuotaServiceDefinition, createChannel(`${outside}:${server.port}`));
    expect((await quota.allow({ policy: 'orders', identity: { user: 'far' } })).allowed).toBe(true);
  });

  it.each([
    ['ipv4:127.0.0.1:5000', true],
    ['127.0.0.1:5000', true],
    ['127.9.8.7:1', true],
    ['ipv6:[::1]:5000', true],
    ['[::ffff:127.0.0.1]:5000', true],
    ['unix:/tmp/quota.sock', true],
    ['ipv4:10.0.0.1:5000', false],
    ['ipv6:[::ffff:10.0.0.1]:5000', false],
    ['ipv6:[fd00::2]:5000', false],
    ['128.0.0.1:5000', false],
    ['127.0.0.1.evil.example:5000', false],
  ])('isLoopback(%s) = %s', (peer, expected) => {
    expect(isLoopback(peer)).toBe(expected);
  });
});
