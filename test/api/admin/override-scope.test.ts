import { Writable } from 'node:stream';
import { createChannel, createClient } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePolicies, VirtualClock } from '@quota-service/core';
import { OverrideMatch, QuotaAdminServiceDefinition, QuotaServiceDefinition } from '@quota-service/contract';
import { AuditLog, valueDigest } from '../../../src/api/admin/audit.js';
import { QuotaAdmin } from '../../../src/api/admin/quota-admin.js';
import { MemoryStateReset } from '../../../src/api/admin/state-reset.js';
import { parseCallers } from '../../../src/config/callers.js';
import { QuotaEngine } from '../../../src/engine/engine.js';
import { type QuotaServer, startQuotaServer } from '../../../src/quota-server.js';
import { createLogger } from '../../../src/logger.js';
import { MemoryOverrides } from '../../../src/overrides/memory-overrides.js';
import { MemoryStore } from '../../../src/store/memory.js';
import { T0 } from '../../support/store-fixtures.js';
import { bearer, codeOf } from '../../support/grpc-calls.js';

/**
 * An admin's `policies` bound every admin call, against a real gRPC server
 * with a callers file: an override names a limit, and a caller may set, get
 * or delete it only when every policy that uses the limit is on its list.
 * ListOverrides shows a caller the overrides of limits its policies use, the
 * value in clear only where it may manage the override, else as the audit
 * log's digest. Without caller authentication (loopback) nothing changes.
 */
const POLICIES = `
policies:
  orders:
    limits:
      - { name: orders, key_by: user, algorithm: token_bucket, capacity: 10, refill_per_second: 2 }
  orders.create:
    limits:
      - { name: orders, key_by: user, algorithm: token_bucket, capacity: 10, refill_per_second: 2 }
      - { name: tenant-per-minute, key_by: tenant, algorithm: fixed_window, limit: 2000, window: minute }
  tenant:
    limits:
      - { name: tenant-per-minute, key_by: tenant, algorithm: fixed_window, limit: 2000, window: minute }
  mcp-sensitive:
    limits:
      - { name: mcp-sensitive-per-hour, key_by: user, algorithm: fixed_window, limit: 10, window: hour }
`;
const TOKENS = {
  support: 'support-token-4b1d7e9a2c3f5061',
  narrow: 'narrow-admin-token-8e2f4a6c1b3d5079',
  orders: 'orders-admin-token-5c7e9a1b3d2f4068',
  desk: 'desk-admin-token-2a4c6e8f0b1d3957',
  app: 'app-token-9f8e7d6c5b4a39281706',
};
const CALLERS = `
callers:
  support:
    token: ${TOKENS.support}
    policies: ['*']
    roles: [admin]
  narrow-admin:
    token: ${TOKENS.narrow}
    policies: [orders]
    roles: [admin]
  orders-admin:
    token: ${TOKENS.orders}
    policies: [orders, orders.create]
    roles: [admin]
  desk:
    token: ${TOKENS.desk}
    roles: [admin]
  app:
    token: ${TOKENS.app}
    policies: ['*']
`;

const EXACT = OverrideMatch.OVERRIDE_MATCH_EXACT;
const PREFIX = OverrideMatch.OVERRIDE_MATCH_PREFIX;
const key = (limit: string, value: string, match = EXACT) => ({ limit, match, value });
const windowSet = (limit: string, value: string, perWindow: number, match = EXACT) => ({
  key: key(limit, value, match),
  parameters: { fixedWindow: { limit: perWindow, window: '' } },
  ttlMs: 3_600_000,
  reason: 'scope test',
});
const bucketSet = (value: string, capacity: number, refillPerSecond = 0) => ({
  key: key('orders', value),
  parameters: { tokenBucket: { capacity, refillPerSecond } },
  ttlMs: 3_600_000,
  reason: 'scope test',
});

async function serve(callers: string | undefined, lines: string[]): Promise<QuotaServer> {
  const logger = createLogger('info', new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
  const policies = parsePolicies(POLICIES);
  const clock = new VirtualClock(T0);
  const store = new MemoryStore(clock);
  const overrides = new MemoryOverrides(clock);
  const engine = new QuotaEngine(policies, store, { overrides });
  const server = await startQuotaServer({
    engine,
    address: '127.0.0.1:0',
    logger,
    callers: callers === undefined ? undefined : parseCallers(callers),
    admin: { admin: new QuotaAdmin(engine, overrides, new MemoryStateReset(store.space)), audit: new AuditLog(logger.child({ component: 'audit' })) },
  });
  server.setServing(true);
  return server;
}

describe('admin calls bounded by the caller’s policies', () => {
  let server: QuotaServer;
  const lines: string[] = [];
  let admin: ReturnType<typeof createClient<typeof QuotaAdminServiceDefinition>>;
  let quota: ReturnType<typeof createClient<typeof QuotaServiceDefinition>>;
  beforeAll(async () => {
    server = await serve(CALLERS, lines);
    const channel = createChannel(`127.0.0.1:${server.port}`);
    admin = createClient(QuotaAdminServiceDefinition, channel);
    quota = createClient(QuotaServiceDefinition, channel);
    // What support (every policy) set up: an override on each limit.
    await admin.setOverride(windowSet('tenant-per-minute', 'globex', 5000), bearer(TOKENS.support));
    await admin.setOverride(windowSet('mcp-sensitive-per-hour', 'vip-7', 20), bearer(TOKENS.support));
    await admin.setOverride(bucketSet('cust-9', 100), bearer(TOKENS.support));
  });
  afterAll(async () => {
    await server?.shutdown(1_000);
  });

  it('an admin of [orders] may reset only orders, and may override no limit a policy outside its list uses', async () => {
    const narrow = bearer(TOKENS.narrow);
    expect(await codeOf(admin.resetQuota({ policy: 'mcp-sensitive', identity: { user: 'v1' } }, narrow))).toBe('PERMISSION_DENIED');
    expect(await codeOf(admin.resetQuota({ policy: 'orders', identity: { user: 'v1' } }, narrow))).toBe('OK');
    // A limit of a policy it may not use: raised to 2^53-1 for every value starting with "v", or another tenant throttled.
    const raise = admin.setOverride(windowSet('mcp-sensitive-per-hour', 'v', Number.MAX_SAFE_INTEGER, PREFIX), narrow);
    await expect(raise).rejects.toThrow(/PERMISSION_DENIED.*caller "narrow-admin" may not use limit "mcp-sensitive-per-hour": no policy on its list uses it/s);
    expect(await codeOf(admin.setOverride(windowSet('tenant-per-minute', 'globex', 1), narrow))).toBe('PERMISSION_DENIED');
    expect(await codeOf(admin.getOverride({ key: key('tenant-per-minute', 'globex') }, narrow))).toBe('PERMISSION_DENIED');
    expect(await codeOf(admin.deleteOverride({ key: key('tenant-per-minute', 'globex') }, narrow))).toBe('PERMISSION_DENIED');
    expect(await codeOf(admin.listOverrides({ limit: 'tenant-per-minute' }, narrow))).toBe('PERMISSION_DENIED');
    // Its own policy's limit is shared with orders.create, which it may not use: an override would change that policy too.
    await expect(admin.setOverride(bucketSet('cust-1', 1_000_000), narrow)).rejects.toThrow(
      /PERMISSION_DENIED.*caller "narrow-admin" may not override limit "orders": a policy outside its list uses it too/s,
    );
    expect(await codeOf(admin.deleteOverride({ key: key('orders', 'cust-9') }, narrow))).toBe('PERMISSION_DENIED');
    // A limit no policy has: refused the same way, so a narrow admin cannot tell which limits exist.
    expect(await codeOf(admin.setOverride(windowSet('no-such-limit', 'x', 1), narrow))).toBe('PERMISSION_DENIED');

    // Nothing changed: support still sees its three overrides as they were, and decisions apply them.
    const all = (await admin.listOverrides({}, bearer(TOKENS.support))).overrides;
    expect(all.map((o) => [o.key!.limit, o.key!.value, o.parameters])).toEqual([
      ['mcp-sensitive-per-hour', 'vip-7', { fixedWindow: { limit: 20, window: 'hour', windowMs: 3_600_000 } }],
      ['orders', 'cust-9', { tokenBucket: { capacity: 100, refillPerSecond: 2 } }],
      ['tenant-per-minute', 'globex', { fixedWindow: { limit: 5000, window: 'minute', windowMs: 60_000 } }],
    ]);
    const mcp = await quota.allow({ policy: 'mcp-sensitive', identity: { user: 'v1' } }, bearer(TOKENS.app));
    expect(mcp.limits[0]).toMatchObject({ limit: 10, remaining: 9 });
    const tenant = await quota.allow({ policy: 'tenant', identity: { tenant: 'globex' } }, bearer(TOKENS.app));
    expect(tenant.limits[0]).toMatchObject({ limit: 5000 });
  });

  it('an admin of every policy that uses a limit may set, get and delete its overrides', async () => {
    const orders = bearer(TOKENS.orders);
    const set = await admin.setOverride(bucketSet('cust-2', 50), orders);
    expect(set.current).toMatchObject({ key: key('orders', 'cust-2'), setBy: 'orders-admin' });
    expect((await admin.getOverride({ key: key('orders', 'cust-2') }, orders)).current!.parameters).toEqual({
      tokenBucket: { capacity: 50, refillPerSecond: 2 },
    });
    expect((await admin.deleteOverride({ key: key('orders', 'cust-2') }, orders)).previous!.key!.value).toBe('cust-2');
    // tenant-per-minute: orders.create is on its list, tenant is not.
    await expect(admin.setOverride(windowSet('tenant-per-minute', 'initech', 1), orders)).rejects.toThrow(
      /PERMISSION_DENIED.*may not override limit "tenant-per-minute": a policy outside its list uses it too/s,
    );
  });

  it('an admin with no policies may override nothing; ValidatePolicies, which reads no state, stays open to it', async () => {
    const desk = bearer(TOKENS.desk);
    expect(await codeOf(admin.setOverride(bucketSet('cust-3', 1e12, 1e9), desk))).toBe('PERMISSION_DENIED');
    expect(await codeOf(admin.getOverride({ key: key('orders', 'cust-9') }, desk))).toBe('PERMISSION_DENIED');
    expect(await codeOf(admin.deleteOverride({ key: key('orders', 'cust-9') }, desk))).toBe('PERMISSION_DENIED');
    expect((await admin.listOverrides({}, desk)).overrides).toEqual([]);
    expect((await admin.validatePolicies({ text: POLICIES, source: 'next.yaml' }, desk)).valid).toBe(true);
    const decision = await quota.allow({ policy: 'orders', identity: { user: 'cust-3' } }, bearer(TOKENS.app));
    expect(decision.limits[0]).toMatchObject({ limit: 10 });
  });

  it('ListOverrides: only limits the caller’s policies use; values in clear where it may manage them, else their digest', async () => {
    const listed = async (token: string) =>
      (await admin.listOverrides({}, bearer(token))).overrides.map((o) => [o.key!.limit, o.key!.value, o.valueSha256, o.setBy, o.parameters]);
    // orders is shared with orders.create: narrow-admin sees that cust-9 has one, by digest only.
    expect(await listed(TOKENS.narrow)).toEqual([['orders', '', valueDigest('cust-9'), 'support', { tokenBucket: { capacity: 100, refillPerSecond: 2 } }]]);
    expect(await listed(TOKENS.orders)).toEqual([
      ['orders', 'cust-9', '', 'support', { tokenBucket: { capacity: 100, refillPerSecond: 2 } }],
      ['tenant-per-minute', '', valueDigest('globex'), 'support', { fixedWindow: { limit: 5000, window: 'minute', windowMs: 60_000 } }],
    ]);
    expect((await listed(TOKENS.support)).map(([limit, value, digest]) => [limit, value, digest])).toEqual([
      ['mcp-sensitive-per-hour', 'vip-7', ''],
      ['orders', 'cust-9', ''],
      ['tenant-per-minute', 'globex', ''],
    ]);
    expect((await admin.listOverrides({ limit: 'orders' }, bearer(TOKENS.narrow))).overrides.map((o) => o.key!.value)).toEqual(['']);
  });

  it('every refusal is one audit line with PERMISSION_DENIED, naming the value by its digest only', () => {
    const refused = lines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((l) => l.component === 'audit' && l.outcome === 'refused' && l.caller === 'narrow-admin' && l.audit === 'override.set');
    expect(refused.map((l) => [l.code, (l.target as { limit: string }).limit])).toEqual([
      ['PERMISSION_DENIED', 'mcp-sensitive-per-hour'],
      ['PERMISSION_DENIED', 'tenant-per-minute'],
      ['PERMISSION_DENIED', 'orders'],
      ['PERMISSION_DENIED', 'no-such-limit'],
    ]);
    const all = lines.join('\n');
    for (const secret of ['globex', 'vip-7', 'cust-9', ...Object.values(TOKENS)]) expect(all).not.toContain(secret);
  });
});

describe('admin calls without caller authentication (loopback)', () => {
  let server: QuotaServer;
  let admin: ReturnType<typeof createClient<typeof QuotaAdminServiceDefinition>>;
  beforeAll(async () => {
    server = await serve(undefined, []);
    admin = createClient(QuotaAdminServiceDefinition, createChannel(`127.0.0.1:${server.port}`));
  });
  afterAll(async () => {
    await server?.shutdown(1_000);
  });

  it('keep full access: any limit, values in clear', async () => {
    await admin.setOverride(windowSet('mcp-sensitive-per-hour', 'vip-8', 20));
    await admin.setOverride(windowSet('tenant-per-minute', 'globex', 1));
    expect((await admin.getOverride({ key: key('tenant-per-minute', 'globex') })).current!.setBy).toBe('loopback');
    expect((await admin.listOverrides({})).overrides.map((o) => [o.key!.limit, o.key!.value, o.valueSha256])).toEqual([
      ['mcp-sensitive-per-hour', 'vip-8', ''],
      ['tenant-per-minute', 'globex', ''],
    ]);
    expect((await admin.deleteOverride({ key: key('tenant-per-minute', 'globex') })).previous!.key!.value).toBe('globex');
  });
});
