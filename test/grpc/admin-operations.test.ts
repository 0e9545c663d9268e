import { createChannel } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePolicies } from '@quota-service/core';
import { valueDigest } from '../../src/api/admin/audit.js';
import { tokenSha256 } from '../../src/config/callers.js';
import type { QuotaServer } from '../../src/quota-server.js';
import {
  type AuditLine,
  auditLines,
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
import { listedServices, reflect } from '../support/reflection.js';

const { FileDescriptorProto } = await import('google-protobuf/google/protobuf/descriptor_pb.js');

/**
 * What the admin API's calls do over gRPC, wired as src/main.ts wires it:
 * overrides set, read and deleted, quotas reset, policies validated, and
 * each change audited; what the quota API then shows; reflection. Who may
 * call it: admin-access.test.ts.
 */
describe('admin API with caller authentication', () => {
  let server: QuotaServer;
  const lines: string[] = [];
  let admin: ReturnType<typeof loopbackClients>['admin'];
  let quota: ReturnType<typeof loopbackClients>['quota'];
  beforeAll(async () => {
    server = await startAdminServer({ callers: CALLERS, lines });
    ({ admin, quota } = loopbackClients(server));
  });
  afterAll(async () => {
    await server?.shutdown(1_000);
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
