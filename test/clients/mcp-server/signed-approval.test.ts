import { createHmac, randomBytes } from 'node:crypto';
import type { CallToolResult, Client } from '@modelcontextprotocol/client';
import { VirtualClock } from '@quota-service/core';
import { APPROVAL_META_KEY, ApprovalTokens, argumentsDigest, REFUSAL_META_KEY, type ApprovalRequestDetails } from '@quota-service/mcp';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { DevClient } from '../../../clients/mcp-server/dev-issuer/dev-clients.js';
import { ALICE, CAROL, startReferenceHttp, type ReferenceHttp } from './http-harness.js';

// The reference server with signed approvals: delete_customer runs only with a
// token an approver (carol, role approver) signed for that exact call. alice's
// client answers every elicitation with yes, as a script would. A second tenant,
// globex, has an agent (dave) and an approver (erin) of its own; pat is an acme
// approver who also holds a role a deployment may name as cross-tenant.

const SECRET = 'test-approval-secret-0123456789abcdef';
const TTL_MS = 5 * 60_000;
const CROSS_TENANT_ROLE = 'platform-approver';

const DAVE = { id: 'dave-cli', secret: 'dev-dave-secret' };
const ERIN = { id: 'erin-console', secret: 'dev-erin-secret' };
const PAT = { id: 'pat-console', secret: 'dev-pat-secret' };
const OTHER_CLIENTS: DevClient[] = [
  { client_id: DAVE.id, client_secret: DAVE.secret, subject: 'dave', tenant: 'globex', scopes: ['tickets:read', 'customers:read'], roles: ['agent'] },
  { client_id: ERIN.id, client_secret: ERIN.secret, subject: 'erin', tenant: 'globex', scopes: ['tickets:read'], roles: ['approver'] },
  { client_id: PAT.id, client_secret: PAT.secret, subject: 'pat', tenant: 'acme', scopes: ['tickets:read'], roles: ['approver', CROSS_TENANT_ROLE] },
];

let clock: VirtualClock;
let server: ReferenceHttp;
const start = (crossTenantRoles?: string[]) =>
  startReferenceHttp({
    server: { approvals: new ApprovalTokens({ secret: SECRET, clock, ttlMs: TTL_MS, ...(crossTenantRoles === undefined ? {} : { crossTenantRoles }) }) },
    extraClients: OTHER_CLIENTS,
  });
beforeEach(async () => {
  clock = new VirtualClock(Date.UTC(2026, 0, 1));
  server = await start();
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
const daveAsks = (customerId: string): ApprovalRequestDetails => ({
  tool: 'delete_customer',
  arguments: { customerId },
  requester: { subject: 'dave', tenant: 'globex' },
});

/** A token as a server without the tenant check signed it: the secret's HMAC over a grant naming both parties. */
function signedGrant(request: ApprovalRequestDetails, approver: { subject: string; tenant?: string }): string {
  const grant = {
    tool: request.tool,
    args: argumentsDigest(request.arguments),
    requester: request.requester,
    approver,
    exp: clock.now() + TTL_MS,
    nonce: randomBytes(16).toString('base64url'),
  };
  const payload = Buffer.from(JSON.stringify(grant)).toString('base64url');
  return `${payload}.${createHmac('sha256', SECRET).update(payload).digest('base64url')}`;
}

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

  it('an approver of another tenant cannot approve: approve_tool_call refuses and signs nothing; an approver of the requester’s tenant can', async () => {
    const dave = await server.connect(DAVE, { elicit: true });
    const request = refusalOf(await deleteCustomer(dave, 'c-200')).approvalRequest!;
    expect(request).toEqual(daveAsks('c-200'));

    const carol = await server.connect(CAROL);
    const crossed = (await carol.callTool({ name: 'approve_tool_call', arguments: { ...request } })) as CallToolResult;
    expect(crossed.isError).toBe(true);
    expect(crossed.structuredContent).toBeUndefined();
    expect(crossed.content[0]).toEqual({
      type: 'text',
      text: 'You can approve calls of your own tenant only (tenant acme); this call is by a user of tenant globex: ask an approver of that tenant.',
    });
    expect(await customerExists(dave, 'c-200')).toBe(true);

    const token = await approve(await server.connect(ERIN), request);
    expect((await deleteCustomer(dave, 'c-200', token)).content[0]).toEqual({ type: 'text', text: 'Deleted customer c-200.' });
    expect((await server.audit()).at(-1)).toMatchObject({
      tool: 'delete_customer',
      principal: { subject: 'dave', tenant: 'globex' },
      approver: { subject: 'erin', tenant: 'globex' },
      result: 'ok',
    });
  });

  it('a token whose approver is of another tenant is refused when presented (other_tenant), whoever signed it, and nothing runs', async () => {
    const dave = await server.connect(DAVE, { elicit: true });
    const problemOf = async (token: string) => {
      const refused = await deleteCustomer(dave, 'c-200', token);
      expect(refused.isError).toBe(true);
      return refusalOf(refused);
    };
    // Signed with the server's secret by a server that did not compare tenants (carol of acme approving dave of globex).
    expect(await problemOf(signedGrant(daveAsks('c-200'), { subject: 'carol', tenant: 'acme' }))).toEqual({
      reason: 'approval_invalid',
      retryable: false,
      problem: 'other_tenant',
    });
    // Signed by a server sharing the secret whose configuration names a cross-tenant role this one does not.
    const elsewhere = new ApprovalTokens({ secret: SECRET, clock, crossTenantRoles: [CROSS_TENANT_ROLE] });
    const pat = { subject: 'pat', tenant: 'acme', scopes: [], roles: ['approver', CROSS_TENANT_ROLE] };
    expect((await problemOf(elsewhere.issue(daveAsks('c-200'), pat).token)).problem).toBe('other_tenant');
    // An approver without a tenant is not of globex either.
    expect((await problemOf(signedGrant(daveAsks('c-200'), { subject: 'root' }))).problem).toBe('other_tenant');

    expect(await customerExists(dave, 'c-200')).toBe(true);
    const refusals = (await server.audit()).filter((record) => record.tool === 'delete_customer' && record.steps.approval === 'invalid');
    expect(refusals.map((record) => record.result)).toEqual(['refused', 'refused', 'refused']);
  });

  it('with a role configured as cross-tenant, its holders approve any tenant’s calls; other approvers still only their own tenant’s', async () => {
    await server.close();
    server = await start([CROSS_TENANT_ROLE]);
    const dave = await server.connect(DAVE, { elicit: true });
    const request = refusalOf(await deleteCustomer(dave, 'c-200')).approvalRequest!;

    const byCarol = (await (await server.connect(CAROL)).callTool({ name: 'approve_tool_call', arguments: { ...request } })) as CallToolResult;
    expect(byCarol.isError).toBe(true);
    expect(await customerExists(dave, 'c-200')).toBe(true);

    const token = await approve(await server.connect(PAT), request);
    expect((await deleteCustomer(dave, 'c-200', token)).content[0]).toEqual({ type: 'text', text: 'Deleted customer c-200.' });
    expect((await server.audit()).at(-1)).toMatchObject({
      principal: { subject: 'dave', tenant: 'globex' },
      approver: { subject: 'pat', tenant: 'acme' },
      result: 'ok',
    });
  });
});
