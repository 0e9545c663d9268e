import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { REFUSAL_META_KEY, type Principal, type ToolResult } from '@quota-service/mcp';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { VirtualClock } from '@quota-service/core';
import { loadPolicyFile } from '../../../src/config/policies.js';
import { MemoryStore } from '../../../src/store/memory.js';
import { startTestService, type TestService } from '../../support/quota-service.js';
import { T0 } from '../../support/store-fixtures.js';
import { alice, type Harness } from './guard-harness.js';
import { type CallOutcome, sdkLines } from './sdk-lines.js';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const call = (h: Harness, name: string, args: Record<string, unknown>) => h.callTool(name, args);
const text = (result: ToolResult) => {
  const first = result.content[0] as { type?: string; text?: string } | undefined;
  return first?.type === 'text' ? (first.text ?? '') : '';
};
/** A principal of its own per test, so tests never share a bucket. */
const principal = (subject: string, over: Partial<Principal> = {}): Principal => ({ ...alice, subject, ...over });

// The same suite against each SDK line: a guarded server and a real client of that line.
describe.each(sdkLines)('$name', (line) => {
  // A real quota service per line (gRPC, memory store on a frozen virtual clock: no
  // refill happens between calls, so every count below is exact).
  let service: TestService;
  let quota: QuotaClient;
  beforeAll(async () => {
    service = await startTestService(new MemoryStore(new VirtualClock(T0)), await loadPolicyFile('config/mcp-policies.yaml'));
    quota = createQuotaClient({ address: `127.0.0.1:${service.server.port}` });
  });
  afterAll(async () => {
    await quota?.close();
    await service?.stop();
  });

  describe('quota step', () => {
    it('runs the tool within quota; over quota returns isError with the text and _meta, and the body does not run', async () => {
      harness = await line.start({ quota, principal: principal('q-over') });
      for (let i = 1; i <= 5; i++) {
        const ok = await call(harness, 'create_ticket', { title: `t${i}` });
        expect(ok.isError, `call ${i}`).toBeFalsy();
        expect(ok.structuredContent).toEqual({ id: `T-${i}` });
      }
      const denied = await call(harness, 'create_ticket', { title: 't6' });
      expect(harness.runs['create_ticket']).toBe(5);
      expect(denied.isError).toBe(true);
      // Bucket of 5 refilling 0.5/s, empty: the next token is 2 s away.
      expect(text(denied)).toBe('Rate limit reached for tool create_ticket (policy mcp-create-ticket). Nothing was executed. Retry after 2 s.');
      expect(denied._meta?.[REFUSAL_META_KEY]).toEqual({
        reason: 'rate_limited',
        retryable: true,
        retryAfterMs: 2000,
        policy: 'mcp-create-ticket',
        limit: 'mcp-create-ticket',
      });
      // Not in structuredContent: the client validated the result against the output schema and accepted it.
      expect(denied.structuredContent).toBeUndefined();

      const records = await harness.auditRecords();
      expect(records).toHaveLength(6);
      expect(records.slice(0, 5).map((r) => r.result)).toEqual(['ok', 'ok', 'ok', 'ok', 'ok']);
      expect(records[5]).toMatchObject({
        tool: 'create_ticket',
        principal: { subject: 'q-over' },
        steps: {
          validation: 'passed',
          authentication: 'passed',
          permission: 'allowed',
          approval: 'not_required',
          quota: { outcome: 'denied', policy: 'mcp-create-ticket', cost: 1, deniedBy: 'mcp-create-ticket', retryAfterMs: 2000, source: 'store' },
        },
        result: 'refused',
      });
    });

    it('a user argument changes neither the quota identity nor the audited principal', async () => {
      harness = await line.start({ quota, principal: principal('q-attacker') });
      for (let i = 0; i < 5; i++) await call(harness, 'create_ticket', { title: 'x', user: 'q-victim' });
      const denied = await call(harness, 'create_ticket', { title: 'x', user: 'q-victim' });
      expect(denied.isError).toBe(true);
      const records = await harness.auditRecords();
      expect(records.every((r) => r.principal?.subject === 'q-attacker')).toBe(true);
      // Argument values are redacted by default: names kept, values gone.
      expect(records[0]?.arguments).toEqual({ title: '[redacted]', user: '[redacted]' });
      expect(await harness.auditText()).not.toContain('q-victim');
      await harness.close();

      // The victim's own bucket is untouched: all five of its tokens are still there.
      harness = await line.start({ quota, principal: principal('q-victim') });
      for (let i = 1; i <= 5; i++) expect((await call(harness, 'create_ticket', { title: 'v' })).isError, `call ${i}`).toBeFalsy();
    });

    it('weighted cost: a bulk call spends one token per ticket', async () => {
      harness = await line.start({ quota, principal: principal('q-bulk') });
      const ok = await call(harness, 'bulk_update_tickets', { ticketIds: ['a', 'b', 'c'], status: 'closed' });
      expect(ok.isError).toBeFalsy();
      // 50 - 3 = 47 left: ask the service directly, spending 1 more.
      const probe = await service.client.allow({ policy: 'mcp-bulk-tickets', identity: { user: 'q-bulk' }, cost: 1 });
      expect(probe.limits[0]?.remaining).toBe(46);
      // 46 left: a 47-ticket call is denied and nothing runs.
      const denied = await call(harness, 'bulk_update_tickets', { ticketIds: Array.from({ length: 47 }, (_, i) => `t${i}`), status: 'closed' });
      expect(denied.isError).toBe(true);
      expect(harness.runs['bulk_update_tickets']).toBe(1);
      const records = await harness.auditRecords();
      expect(records.map((r) => r.steps.quota.cost)).toEqual([3, 47]);
    });

    it('a cost the policy can never grant is refused with the service reason, nothing runs', async () => {
      harness = await line.start({ quota, principal: principal('q-toolarge') });
      const refused = await call(harness, 'bulk_update_tickets', { ticketIds: Array.from({ length: 51 }, (_, i) => `t${i}`), status: 'x' });
      expect(refused.isError).toBe(true);
      expect(text(refused)).toMatch(/^The quota check for tool bulk_update_tickets \(policy mcp-bulk-tickets\) was refused: .*cost/);
      expect(refused._meta?.[REFUSAL_META_KEY]).toMatchObject({ reason: 'quota_error', retryable: false });
      expect(harness.runs['bulk_update_tickets']).toBe(0);
      expect((await harness.auditRecords())[0]).toMatchObject({ steps: { quota: { outcome: 'error' } }, result: 'refused' });
    });
  });

  describe('validation step (the SDK)', () => {
    it('invalid arguments and an unknown tool stay the SDK errors and never reach the body or the quota', async () => {
      harness = await line.start({ quota, principal: principal('v-1') });
      const invalid = await call(harness, 'create_ticket', { title: 42 });
      expect(invalid.isError).toBe(true);
      expect(text(invalid)).toMatch(/Input validation error/);
      const unknown: CallOutcome = await call(harness, 'no_such_tool', {}).then(
        (result) => ({ result }),
        (error: { code?: unknown; message: string }) => ({ error: { code: error.code, message: error.message } }),
      );
      expect(unknown).toEqual(line.unknownTool);
      expect(harness.runs['create_ticket']).toBe(0);
      // Nothing was spent: all 5 tokens remain.
      const probe = await service.client.allow({ policy: 'mcp-create-ticket', identity: { user: 'v-1' }, cost: 1 });
      expect(probe.limits[0]?.remaining).toBe(4);
    });
  });

  describe('permission step', () => {
    it('a principal without the scope gets "not permitted", is audited, nothing runs and no quota is spent', async () => {
      harness = await line.start({ quota, principal: principal('p-reader', { scopes: ['tickets:read'] }) });
      const denied = await call(harness, 'create_ticket', { title: 'x' });
      expect(denied.isError).toBe(true);
      expect(text(denied)).toBe('Tool create_ticket is not permitted for this caller. Nothing was executed.');
      expect(denied._meta?.[REFUSAL_META_KEY]).toEqual({ reason: 'not_permitted', retryable: false });
      expect(harness.runs['create_ticket']).toBe(0);
      expect(await harness.auditRecords()).toMatchObject([
        {
          tool: 'create_ticket',
          steps: { permission: 'denied', approval: 'not_checked', quota: { outcome: 'not_checked' } },
          result: 'refused',
          reason: 'missing scope tickets:write',
        },
      ]);
      const probe = await service.client.allow({ policy: 'mcp-create-ticket', identity: { user: 'p-reader' }, cost: 1 });
      expect(probe.limits[0]?.remaining).toBe(4);
    });

    it('a principal without any of the roles is not permitted', async () => {
      harness = await line.start({
        quota,
        principal: principal('p-norole', { roles: ['viewer'] }),
        elicitation: () => ({ action: 'accept', content: { approve: true } }),
      });
      const denied = await call(harness, 'delete_customer', { customerId: 'c-1' });
      expect(denied.isError).toBe(true);
      expect(harness.runs['delete_customer']).toBe(0);
      expect((await harness.auditRecords())[0]).toMatchObject({
        steps: { permission: 'denied', approval: 'not_checked' },
        reason: 'needs one of roles agent, admin',
      });
    });

    it('no verified principal: refused as not authenticated', async () => {
      harness = await line.start({ quota });
      const denied = await call(harness, 'create_ticket', { title: 'x' });
      expect(denied._meta?.[REFUSAL_META_KEY]).toEqual({ reason: 'not_authenticated', retryable: false });
      expect(harness.runs['create_ticket']).toBe(0);
      expect((await harness.auditRecords())[0]).toMatchObject({ principal: null, steps: { authentication: 'failed' }, result: 'refused' });
    });
  });

  describe('approval step', () => {
    it('approved through elicitation: the tool runs, the approval is audited', async () => {
      let asked = '';
      harness = await line.start({
        quota,
        principal: principal('a-yes'),
        elicitation: (request) => {
          asked = request.params.message;
          return { action: 'accept', content: { approve: true } };
        },
      });
      const ok = await call(harness, 'delete_customer', { customerId: 'c-7' });
      expect(ok.isError).toBeFalsy();
      expect(asked).toBe('Delete customer c-7?');
      expect(harness.runs['delete_customer']).toBe(1);
      expect((await harness.auditRecords())[0]).toMatchObject({
        steps: { approval: 'approved', quota: { outcome: 'allowed', policy: 'mcp-sensitive' } },
        result: 'ok',
      });
    });

    it.each([
      ['declined', { action: 'decline' as const }, 'approval_declined', 'the approval was declined'],
      ['declined', { action: 'accept' as const, content: { approve: false } }, 'approval_declined', 'the approval was declined'],
      ['cancelled', { action: 'cancel' as const }, 'approval_cancelled', 'the approval request was cancelled'],
    ])('%s through elicitation (%j): tool error, audited, nothing executed, no quota spent', async (outcome, answer, reason, words) => {
      const subject = `a-${outcome}-${answer.action}`;
      harness = await line.start({ quota, principal: principal(subject), elicitation: () => answer });
      const refused = await call(harness, 'delete_customer', { customerId: 'c-1' });
      expect(refused.isError).toBe(true);
      expect(text(refused)).toBe(`Tool delete_customer needs human approval and ${words}. Nothing was executed.`);
      expect(refused._meta?.[REFUSAL_META_KEY]).toMatchObject({ reason });
      expect(harness.runs['delete_customer']).toBe(0);
      expect((await harness.auditRecords())[0]).toMatchObject({ steps: { approval: outcome, quota: { outcome: 'not_checked' } }, result: 'refused' });
      const probe = await service.client.allow({ policy: 'mcp-sensitive', identity: { user: subject }, cost: 1 });
      expect(probe.limits[0]?.remaining).toBe(9);
    });

    it('a client without elicitation and no approver: refused as unsupported, nothing executed', async () => {
      harness = await line.start({ quota, principal: principal('a-unsupported') });
      const refused = await call(harness, 'delete_customer', { customerId: 'c-1' });
      expect(refused.isError).toBe(true);
      expect(refused._meta?.[REFUSAL_META_KEY]).toEqual({ reason: 'approval_unavailable', retryable: false });
      expect(harness.runs['delete_customer']).toBe(0);
      expect((await harness.auditRecords())[0]).toMatchObject({ steps: { approval: 'unsupported' }, result: 'refused' });
    });

    it('a client without elicitation falls back to the out-of-band approver', async () => {
      const asked: string[] = [];
      harness = await line.start({
        quota,
        principal: principal('a-oob'),
        approver: {
          async approve(request) {
            asked.push(`${request.principal.subject}:${request.tool}:${request.message}`);
            return asked.length === 1 ? 'approved' : 'declined';
          },
        },
      });
      expect((await call(harness, 'delete_customer', { customerId: 'c-1' })).isError).toBeFalsy();
      expect((await call(harness, 'delete_customer', { customerId: 'c-2' })).isError).toBe(true);
      expect(asked).toEqual(['a-oob:delete_customer:Delete customer c-1?', 'a-oob:delete_customer:Delete customer c-2?']);
      expect(harness.runs['delete_customer']).toBe(1);
      expect((await harness.auditRecords()).map((r) => r.steps.approval)).toEqual(['approved', 'declined']);
    });
  });

  describe('quota service down', () => {
    let dead: QuotaClient;
    beforeEach(async () => {
      // A port where a quota service just stopped listening.
      const gone = await startTestService(new MemoryStore(new VirtualClock(T0)), await loadPolicyFile('config/mcp-policies.yaml'));
      const port = gone.server.port;
      await gone.stop();
      dead = createQuotaClient({ address: `127.0.0.1:${port}` });
    });
    afterEach(async () => {
      await dead.close();
    });

    it('fail-closed tool: a clear tool error, nothing executed, audited', async () => {
      harness = await line.start({ quota: dead, principal: principal('d-closed') });
      const refused = await call(harness, 'create_ticket', { title: 'x' });
      expect(refused.isError).toBe(true);
      expect(text(refused)).toBe(
        'The quota service could not be reached for tool create_ticket (policy mcp-create-ticket), and this tool fails closed. Nothing was executed. Retry later.',
      );
      expect(refused._meta?.[REFUSAL_META_KEY]).toEqual({ reason: 'quota_unavailable', retryable: true, policy: 'mcp-create-ticket' });
      expect(harness.runs['create_ticket']).toBe(0);
      expect((await harness.auditRecords())[0]).toMatchObject({ steps: { quota: { outcome: 'fail_closed', source: 'fail_closed' } }, result: 'refused' });
    });

    it('fail-open tool: runs, audited as fail_open', async () => {
      harness = await line.start({ quota: dead, principal: principal('d-open') });
      const ok = await call(harness, 'search_tickets', { query: 'x' });
      expect(ok.isError).toBeFalsy();
      expect(harness.runs['search_tickets']).toBe(1);
      expect((await harness.auditRecords())[0]).toMatchObject({ steps: { quota: { outcome: 'fail_open' } }, result: 'ok' });
    });
  });

  describe('credentials', () => {
    const token = 'dev-secret-token-0123456789';

    it('the verified credential wins over the configured principal, and the raw token reaches neither audit nor log', async () => {
      const lines: string[] = [];
      const sink = new Writable({
        write(chunk, _encoding, done) {
          lines.push(String(chunk));
          done();
        },
      });
      const dead = createQuotaClient({ address: '127.0.0.1:1' });
      harness = await line.start({
        quota: dead,
        principal: principal('c-configured'),
        authInfo: { token, clientId: 'c-client', scopes: ['tickets:read'], extra: { subject: 'c-from-token', tenant: 'acme' } },
        logger: pino({ level: 'debug' }, sink),
      });
      // search_tickets fails open on a dead service, which logs a warning.
      expect((await call(harness, 'search_tickets', { query: token })).isError).toBeFalsy();
      // The token's scopes apply, not the configured principal's.
      expect((await call(harness, 'create_ticket', { title: token })).isError).toBe(true);
      await dead.close();
      const records = await harness.auditRecords();
      expect(records.map((r) => r.principal)).toEqual([
        { subject: 'c-from-token', tenant: 'acme', clientId: 'c-client' },
        { subject: 'c-from-token', tenant: 'acme', clientId: 'c-client' },
      ]);
      expect(records[1]?.steps.permission).toBe('denied');
      expect(lines.length).toBeGreaterThan(0);
      expect(lines.join('')).not.toContain(token);
      expect(await harness.auditText()).not.toContain(token);
    });
  });
});
