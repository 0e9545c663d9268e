import { networkInterfaces } from 'node:os';
import { Writable } from 'node:stream';
import { ClientError, createChannel, createClient, Metadata, Status } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parsePolicies, type PolicySet, VirtualClock } from '@quota-service/core';
import { OverrideMatch, QuotaAdminServiceDefinition, QuotaServiceDefinition } from '@quota-service/contract';
import { AuditLog, valueDigest } from '../../src/api/admin/audit.js';
import { QuotaAdmin } from '../../src/api/admin/quota-admin.js';
import { MemoryStateReset } from '../../src/api/admin/state-reset.js';
import { parseCallers, tokenSha256 } from '../../src/config/callers.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { isLoopback } from '../../src/api/admin/admin-access.js';
import { listedServices, reflect } from '../support/reflection.js';
import { type QuotaServer, startQuotaServer } from '../../src/quota-server.js';
import { createLogger } from '../../src/logger.js';
import { MemoryOverrides } from '../../src/overrides/memory-overrides.js';
import { MemoryStore } from '../../src/store/memory.js';
import { T0 } from '../support/store-fixtures.js';

const { FileDescriptorProto } = await import('google-protobuf/google/protobuf/descriptor_pb.js');

/**
 * The admin API over gRPC, wired as src/main.ts wires it: refused without the
 * admin role (or, without caller authentication, from anywhere but loopback),
 * audited with it, and what its calls do.
 */
const ORDER_API_TOKEN = 'order-api-token-7f3a9c1e5b2d4f60';
const SUPPORT_TOKEN = 'support-token-1a2b3c4d5e6f7a8b9c0d';
const NARROW_ADMIN_TOKEN = 'narrow-admin-token-99887766554433';
const CALLERS = `
callers:
  order-api:
    token: ${ORDER_API_TOKEN}
    policies: [orders]
  support:
    token_sha256: ${tokenSha256(SUPPORT_TOKEN)}
    policies: ['*']
    roles: [admin]
  narrow-admin:
    token: ${NARROW_ADMIN_TOKEN}
    policies: [orders]
    roles: [admin]
`;

const POLICIES = stringify({
  policies: {
    orders: { limits: [{ name: 'orders', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 }] },
    api: {
      limits: [
        { name: 'calls', key_by: 'tenant', algorithm: 'token_bucket', capacity: 5, refill_per_second: 1, plan_by: 'plan', plans: { pro: { capacity: 50 } } },
      ],
    },
  },
});

const bearer = (token: string) => ({ metadata: Metadata({ authorization: `Bearer ${token}` }) });
const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => 'OK',
    (error: unknown) => (error instanceof ClientError ? Status[error.code] : `not a gRPC error: ${String(error)}`),
  );

async function serve(options: { callers?: string; address?: string; lines: string[] }): Promise<QuotaServer> {
  const logger = createLogger('info', new Writable({ write: (chunk, _enc, done) => (options.lines.push(String(chunk)), done()) }));
  const policies: PolicySet = parsePolicies(POLICIES);
  // Frozen time: what these tests count never refills under them, however slow the machine.
  const clock = new VirtualClock(T0);
  const store = new MemoryStore(clock);
  const overrides = new MemoryOverrides(clock);
  const engine = new QuotaEngine(policies, store, { overrides });
  const audit = new AuditLog(logger.child({ component: 'audit' }));
  const server = await startQuotaServer({
    engine,
    address: options.address ?? '127.0.0.1:0',
    logger,
    callers: options.callers === undefined ? undefined : parseCallers(options.callers),
    admin: { admin: new QuotaAdmin(engine, overrides, new MemoryStateReset(store.space)), audit },
  });
  server.setServing(true);
  return server;
}

/** One audit line as logged. */
interface AuditLine {
  [field: string]: unknown;
  after?: unknown;
  before?: unknown;
  reason?: unknown;
}

const auditLines = (lines: string[]) => lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((l) => l.component === 'audit');

/** The audit lines one admin call wrote, whatever it answered (the tests run one call at a time). */
async function auditOf(lines: string[], call: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
  const from = lines.length;
  await call().catch(() => undefined);
  return auditLines(lines.slice(from));
}

const setRequest = (value: string, capacity = 100) => ({
  key: { limit: 'orders', match: OverrideMatch.OVERRIDE_MATCH_EXACT, value },
  parameters: { tokenBucket: { capacity, refillPerSecond: 0 } },
  ttlMs: 7_200_000,
  reason: 'incident 4711',
});

describe('admin API with caller authentication', () => {
  let server: QuotaServer;
  const lines: string[] = [];
  let admin: ReturnType<typeof createClient<typeof QuotaAdminServiceDefinition>>;
  let quota: ReturnType<typeof createClient<typeof QuotaServiceDefinition>>;
  beforeAll(async () => {
    server = await serve({ callers: CALLERS, lines });
    const channel = createChannel(`127.0.0.1:${server.port}`);
    admin = createClient(QuotaAdminServiceDefinition, channel);
    quota = createClient(QuotaServiceDefinition, channel);
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

  it('lets an admin set, get, list and delete overrides; every change is one audit line (who, what, before, after) without the value or a token', async () => {
    const first = await admin.setOverride(setRequest('customer-7'), bearer(SUPPORT_TOKEN));
    expect(first.previous).toBeUndefined();
    expect(first.current).toMatchObject({ key: setRequest('customer-7').key, keyBy: 'user', setBy: 'support', reason: 'incident 4711' });
    // Parameters left at 0 are the limit's own.
    expect(first.current!.parameters).toEqual({ tokenBucket: { capacity: 100, refillPerSecond: 2 } });
    expect(first.current!.expiresAtMs - first.current!.setAtMs).toBe(7_200_000);
    const second = await admin.setOverride(setRequest('customer-7', 200), bearer(SUPPORT_TOKEN));
    expect(second.previous!.parameters).toEqual({ tokenBucket: { capacity: 100, refillPerSecond: 2 } });
    expect((await admin.getOverride({ key: setRequest('customer-7').key }, bearer(SUPPORT_TOKEN))).current!.parameters!.tokenBucket!.capacity).toBe(200);
    expect((await admin.listOverrides({ limit: 'orders' }, bearer(SUPPORT_TOKEN))).overrides.map((o) => o.key!.value)).toEqual(['customer-7']);
    // The quota API applies it and says so.
    const decision = await quota.allow({ policy: 'orders', identity: { user: 'customer-7' } }, bearer(SUPPORT_TOKEN));
    expect(decision.limits[0]).toMatchObject({ limit: 200, remaining: 199, applied: 4 });
    const deleted = await admin.deleteOverride({ key: setRequest('customer-7').key }, bearer(SUPPORT_TOKEN));
    expect(deleted.previous!.parameters!.tokenBucket!.capacity).toBe(200);
    expect(await codeOf(admin.getOverride({ key: setRequest('customer-7').key }, bearer(SUPPORT_TOKEN)))).toBe('NOT_FOUND');
    expect(await codeOf(admin.deleteOverride({ key: setRequest('customer-7').key }, bearer(SUPPORT_TOKEN)))).toBe('NOT_FOUND');

    const ofCustomer = (l: Record<string, unknown>) => (l.target as { valueSha256?: string }).valueSha256 === valueDigest('customer-7');
    const actions = auditLines(lines).filter((l) => (l.audit === 'override.set' || l.audit === 'override.delete') && l.outcome === 'ok' && ofCustomer(l));
    expect(actions.map((l) => l.audit)).toEqual(['override.set', 'override.set', 'override.delete']);
    // Audit lines are free-form JSON; their shape is what these assertions check.
    const [set1, set2, removed] = actions as AuditLine[];
    expect(set1).toMatchObject({
      level: 30,
      caller: 'support',
      outcome: 'ok',
      target: { limit: 'orders', match: 'exact', valueSha256: expect.stringMatching(/^[0-9a-f]{16}$/) },
      before: null,
    });
    expect(set1!.after).toMatchObject({ parameters: { capacity: 100, refill_per_second: 2 }, setBy: 'support' });
    expect(set1!.reason).toBe('incident 4711');
    expect(set2!.before).toMatchObject({ parameters: { capacity: 100 } });
    expect(set2!.after).toMatchObject({ parameters: { capacity: 200 } });
    expect(removed).toMatchObject({ before: { parameters: { capacity: 200 } }, after: null });
    const all = lines.join('\n');
    for (const secret of ['customer-7', SUPPORT_TOKEN, ORDER_API_TOKEN, NARROW_ADMIN_TOKEN, tokenSha256(SUPPORT_TOKEN)]) expect(all).not.toContain(secret);
  });

  it('ResetQuota: the next decision starts from a full bucket; before and after are reported and audited', async () => {
    for (let i = 0; i < 10; i++) await quota.allow({ policy: 'orders', identity: { user: 'locked-out' } }, bearer(SUPPORT_TOKEN));
    expect((await quota.allow({ policy: 'orders', identity: { user: 'locked-out' } }, bearer(SUPPORT_TOKEN))).allowed).toBe(false);
    const { before, after } = await admin.resetQuota({ policy: 'orders', identity: { user: 'locked-out' } }, bearer(SUPPORT_TOKEN));
    expect(before[0]!.remaining).toBeLessThan(1);
    expect(after[0]).toMatchObject({ name: 'orders', remaining: 10, limit: 10, resetAfterMs: 0 });
    const next = await quota.allow({ policy: 'orders', identity: { user: 'locked-out' } }, bearer(SUPPORT_TOKEN));
    expect(next.limits[0]!.remaining).toBe(9);
    const line = auditLines(lines).find((l) => l.audit === 'reset' && l.outcome === 'ok') as AuditLine;
    expect(line).toMatchObject({
      caller: 'support',
      target: { policy: 'orders', identity: { user: expect.stringMatching(/^[0-9a-f]{16}$/) }, limits: [] },
    });
    expect(line.before).toEqual([{ limit: 'orders', remaining: expect.any(Number), of: 10 }]);
    expect(line.after).toEqual([{ limit: 'orders', remaining: 10, of: 10 }]);
    expect(lines.join('\n')).not.toContain('locked-out');
    // Bad input names the field and resets nothing.
    await expect(admin.resetQuota({ policy: 'orders', identity: {} }, bearer(SUPPORT_TOKEN))).rejects.toThrow(/identity\.user: required/);
    await expect(admin.resetQuota({ policy: 'orders', identity: { user: 'x' }, limits: ['nope'] }, bearer(SUPPORT_TOKEN))).rejects.toThrow(
      /limits\[0\]: policy "orders" has no limit "nope"/,
    );
  });

  it('an admin limited to some policies may reset only those', async () => {
    expect(await codeOf(admin.resetQuota({ policy: 'orders', identity: { user: 'x' } }, bearer(NARROW_ADMIN_TOKEN)))).toBe('OK');
    expect(await codeOf(admin.resetQuota({ policy: 'api', identity: { tenant: 'x' } }, bearer(NARROW_ADMIN_TOKEN)))).toBe('PERMISSION_DENIED');
  });

  it("ValidatePolicies gives the loader's own messages and loads nothing", async () => {
    const good = await admin.validatePolicies({ text: POLICIES, source: 'next.yaml' }, bearer(SUPPORT_TOKEN));
    expect(good).toEqual({ valid: true, message: '', policies: ['orders', 'api'] });
    const broken = POLICIES.replace('capacity: 10', 'capacity: -10');
    const bad = await admin.validatePolicies({ text: broken, source: 'next.yaml' }, bearer(SUPPORT_TOKEN));
    let expected = '';
    try {
      parsePolicies(broken, 'next.yaml');
    } catch (error) {
      expected = (error as Error).message;
    }
    expect(bad).toEqual({ valid: false, message: expected, policies: [] });
    expect(bad.message).toContain('next.yaml: invalid policies:\n  policies.orders.limits[0].capacity:');
    expect((await admin.validatePolicies({ text: 'policies: [' }, bearer(SUPPORT_TOKEN))).message).toMatch(/^policies: invalid YAML/);
    // The service still enforces the loaded policies.
    expect((await quota.listPolicies({}, bearer(SUPPORT_TOKEN))).policies.map((p) => p.name)).toEqual(['orders', 'api']);
  });

  it("ListPolicies shows a limit's plans with their whole parameters", async () => {
    const api = (await quota.listPolicies({}, bearer(SUPPORT_TOKEN))).policies.find((p) => p.name === 'api')!;
    expect(api.limits[0]).toMatchObject({ planBy: 'plan', plans: [{ name: 'pro', parameters: { tokenBucket: { capacity: 50, refillPerSecond: 1 } } }] });
  });

  it('reflection lists and describes quota.v1.QuotaAdminService', async () => {
    const channel = createChannel(`127.0.0.1:${server.port}`);
    const names = await listedServices(channel);
    expect(names).toEqual(expect.arrayContaining(['quota.v1.QuotaService', 'quota.v1.QuotaAdminService']));
    const files = (await reflect(channel, (r) => r.setFileContainingSymbol('quota.v1.QuotaAdminService')))
      .getFileDescriptorResponse()!
      .getFileDescriptorProtoList_asU8();
    const admin = files.map((f: Uint8Array) => FileDescriptorProto.deserializeBinary(f)).find((f) => f.getName() === 'quota/v1/admin.proto')!;
    expect(
      admin
        .getServiceList()[0]!
        .getMethodList()
        .map((m) => m.getName()),
    ).toEqual(['ResetQuota', 'SetOverride', 'GetOverride', 'ListOverrides', 'DeleteOverride', 'ValidatePolicies']);
  });
});

describe('admin API without caller authentication: loopback only', () => {
  const outside = Object.values(networkInterfaces())
    .flat()
    .find((i) => i !== undefined && i.family === 'IPv4' && !i.internal)?.address;
  let server: QuotaServer;
  const lines: string[] = [];
  beforeAll(async () => {
    server = await serve({ address: '0.0.0.0:0', lines });
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
