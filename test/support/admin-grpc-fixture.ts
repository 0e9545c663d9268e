import { Writable } from 'node:stream';
import { type Client, createChannel, createClient } from 'nice-grpc';
import { stringify } from 'yaml';
import { parsePolicies, type PolicySet, VirtualClock } from '@quota-service/core';
import { OverrideMatch, QuotaAdminServiceDefinition, QuotaServiceDefinition } from '@quota-service/contract';
import { AuditLog } from '../../src/api/admin/audit.js';
import { QuotaAdmin } from '../../src/api/admin/quota-admin.js';
import { MemoryStateReset } from '../../src/api/admin/state-reset.js';
import { parseCallers, tokenSha256 } from '../../src/config/callers.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { type QuotaServer, startQuotaServer } from '../../src/quota-server.js';
import { createLogger } from '../../src/logger.js';
import { MemoryOverrides } from '../../src/overrides/memory-overrides.js';
import { MemoryStore } from '../../src/store/memory.js';
import { T0 } from './store-fixtures.js';

/**
 * The admin API over gRPC, wired as src/main.ts wires it, for the tests in
 * test/grpc/admin-*.test.ts: its callers, its policies, a server whose log
 * lines (the audit among them) the test reads, and helpers for the calls.
 */
export const ORDER_API_TOKEN = 'order-api-token-7f3a9c1e5b2d4f60';
export const SUPPORT_TOKEN = 'support-token-1a2b3c4d5e6f7a8b9c0d';
export const NARROW_ADMIN_TOKEN = 'narrow-admin-token-99887766554433';
/** order-api may not use the admin API; support is an admin of every policy; narrow-admin an admin of orders only. */
export const CALLERS = `
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

export const POLICIES = stringify({
  policies: {
    orders: { limits: [{ name: 'orders', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 }] },
    api: {
      limits: [
        { name: 'calls', key_by: 'tenant', algorithm: 'token_bucket', capacity: 5, refill_per_second: 1, plan_by: 'plan', plans: { pro: { capacity: 50 } } },
      ],
    },
  },
});

/** A serving quota server with the admin API on POLICIES; every log line it writes is pushed onto `lines`. */
export async function startAdminServer(options: { callers?: string; address?: string; lines: string[] }): Promise<QuotaServer> {
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

/** An admin client and a quota client of `server`, on one loopback channel. */
export function loopbackClients(server: QuotaServer): {
  admin: Client<typeof QuotaAdminServiceDefinition>;
  quota: Client<typeof QuotaServiceDefinition>;
} {
  const channel = createChannel(`127.0.0.1:${server.port}`);
  return { admin: createClient(QuotaAdminServiceDefinition, channel), quota: createClient(QuotaServiceDefinition, channel) };
}

/** One audit line as logged. */
export interface AuditLine {
  [field: string]: unknown;
  after?: unknown;
  before?: unknown;
  reason?: unknown;
}

export const auditLines = (lines: string[]) => lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((l) => l.component === 'audit');

/** The audit lines one admin call wrote, whatever it answered (the tests run one call at a time). */
export async function auditOf(lines: string[], call: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
  const from = lines.length;
  await call().catch(() => undefined);
  return auditLines(lines.slice(from));
}

/** A SetOverride request: capacity for one user of the orders limit, for two hours. */
export const setRequest = (value: string, capacity = 100) => ({
  key: { limit: 'orders', match: OverrideMatch.OVERRIDE_MATCH_EXACT, value },
  parameters: { tokenBucket: { capacity, refillPerSecond: 0 } },
  ttlMs: 7_200_000,
  reason: 'incident 4711',
});
