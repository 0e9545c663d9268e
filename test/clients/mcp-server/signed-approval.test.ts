import type { CallToolResult, Client } from '@modelcontextprotocol/client';
import { VirtualClock } from '@quota-service/core';
import { APPROVAL_META_KEY, ApprovalTokens, argumentsDigest, REFUSAL_META_KEY, type ApprovalRequestDetails } from '@quota-service/mcp';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ALICE, CAROL, startReferenceHttp, type ReferenceHttp } from './http-harness.js';

// The reference server with signed approvals: delete_customer runs only with a
// token an approver (carol, role approver) signed for that exact call. alice's
// client answers every elicitation with yes, as a script would.

const SECRET = 'test-approval-secret-0123456789abcdef';
const TTL_MS = 5 * 60_000;

let clock: VirtualClock;
let server: ReferenceHttp;
beforeEach(async () => {
  clock = new VirtualClock(Date.UTC(2026, 0, 1));
  server = await startReferenceHttp({ server: { approvals: new ApprovalTokens({ secret: SECRET, clock, ttlMs: TTL_MS }) } });
});
afterEach(async () => {
  await server?.close();
});

const deleteCustomer = async (client: Client, customerId: string, token?: string) =>
  (await client.callTool({
    name: 'delete_customer',
    arguments: { customerId },
    ...(token === undefined ? {} : { _meta: { [APPROVAL_META_KEY]: token } }),
  })) as CallToolResult;
const refusalOf = (result: CallToolResult) =>
  result._meta?.[REFUSAL_META_KEY] as { reason: string; approvalRequest?: ApprovalRequestDetails; problem?: string };
const aliceAsks = (customerId: string): ApprovalRequestDetails => ({
  tool: 'delete_customer',
  arguments: { customerId },
  requester: { subject: 'alice', tenant: 'acme' },
});

async function approve(approver: Client, request: ApprovalRequestDetails): Promise<string> {
  const result = (await approver.callTool({ name: 'approve_tool_call', arguments: { ...request } })) as CallToolResult;
  expect(result.isError).toBeFalsy();
  return (result.structuredContent as { token: string }).token;
}

/** alice, whose client says yes to every elicitation (and counts them). */
async function scriptedAlice() {
  const asked = { count: 0 };
  const client = await server.connect(ALICE, { elicit: true, onElicit: () => void asked.count++ });
  return { client, asked };
}

const customerExists = async (client: Client, id: string) =>
  client.readResource({ uri: `customers://${id}` }).then(
    () => true,
    () => false,
  );

describe('signed approval of delete_customer', () => {
  it('the calling client cannot approve its own call: it is not asked, and the refusal says what an approver must approve', async () => {
    const { client: alice, asked } = await scriptedAlice();
    const refused = await deleteCustomer(alice, 'c-100');
    expect(refused.isError).toBe(true);
    expect(refusalOf(refused)).toEqual({ reason: 'approval_required', retryable: false, approvalRequest: aliceAsks('c-100') });
    expect(asked.count).toBe(0);
    expect(await customerExists(alice, 'c-100')).toBe(true);
    expect((await server.audit()).at(-1)).toMatchObject({
      tool: 'delete_customer',
      principal: { subject: 'alice' },
      steps: { approval: 'required', quota: { outcome: 'not_checked' } },
      result: 'refused',
    });

    // Nor can it sign an approval: approve_tool_call is for approvers only.
    const selfApproval = (await alice.callTool({ name: 'approve_tool_call', arguments: { ...aliceAsks('c-100') } })) as CallToolResult;
    expect(refusalOf(selfApproval)).toMatchObject({ reason: 'not_permitted' });
  });

  it("an approver's token lets the requester run exactly that call, once, and the audit names the approver", async () => {
    const { client: alice } = await scriptedAlice();
    const carol = await server.connect(CAROL);
    const request = refusalOf(await deleteCustomer(alice, 'c-100')).approvalRequest!;
    const token = await approve(carol, request);

    const deleted = await deleteCustomer(alice, 'c-100', token);
    expect(deleted.content[0]).toEqual({ type: 'text', text: 'Deleted customer c-100.' });
    expect((await server.audit()).at(-1)).toMatchObject({
      tool: 'delete_customer',
      principal: { subject: 'alice', tenant: 'acme' },
      approver: { subject: 'carol', tenant: 'acme' },
      steps: { approval: 'approved' },
      result: 'ok',
    });

    const replayed = await deleteCustomer(alice, 'c-100', token);
    expect(refusalOf(replayed)).toEqual({ reason: 'approval_invalid', retryable: false, problem: 'used' });
  });

  it('a token for another call, a forged, tampered or expired token is refused and nothing runs', async () => {
    const { client: alice } = await scriptedAlice();
    const carol = await server.connect(CAROL);
    const problemOf = async (customerId: string, token: string) => refusalOf(await deleteCustomer(alice, customerId, token)).problem;

    // Other arguments, another requester.
    expect(await problemOf('c-100', await approve(carol, aliceAsks('c-200')))).toBe('other_call');
    expect(await problemOf('c-100', await approve(carol, { ...aliceAsks('c-100'), requester: { subject: 'bob', tenant: 'acme' } }))).toBe('other_call');

    // alice signs one herself without the server's secret, or edits a real one.
    const forged = new ApprovalTokens({ secret: 'a-secret-alice-made-up-herself-0123', clock }).issue(aliceAsks('c-100'), {
      subject: 'mallory',
      tenant: 'acme',
      scopes: [],
      roles: ['approver'],
    });
    expect(await problemOf('c-100', forged.token)).toBe('bad_signature');
    const real = await approve(carol, aliceAsks('c-200'));
    const [payload, signature] = real.split('.') as [string, string];
    const grant = Buffer.from(payload, 'base64url').toString();
    const edited = Buffer.from(grant.replace(argumentsDigest({ customerId: 'c-200' }), argumentsDigest({ customerId: 'c-100' }))).toString('base64url');
    expect(edited).not.toBe(payload);
    expect(await problemOf('c-100', `${edited}.${signature}`)).toBe('bad_signature');
    expect(await problemOf('c-100', 'not-a-token')).toBe('malformed');

    // Expired.
    clock.advance(TTL_MS);
    expect(await problemOf('c-200', real)).toBe('expired');

    expect(await customerExists(alice, 'c-100')).toBe(true);
    expect(await customerExists(alice, 'c-200')).toBe(true);
  });

  it('an approver cannot approve its own calls', async () => {
    const carol = await server.connect(CAROL);
    const own = (await carol.callTool({
      name: 'approve_tool_call',
      arguments: { tool: 'delete_customer', arguments: { customerId: 'c-100' }, requester: { subject: 'carol', tenant: 'acme' } },
    })) as CallToolResult;
    expect(own.isError).toBe(true);
    expect(own.content[0]).toEqual({ type: 'text', text: 'You cannot approve your own calls: ask another approver.' });
  });
});
