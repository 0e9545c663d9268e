import { z } from 'zod';
import type { ApprovalTokens, ToolGuard } from '@quota-service/mcp/v2';

/** A tenant in words, for a refusal: a principal without one has none. */
const tenantOf = (tenant: string | undefined) => (tenant === undefined ? 'no tenant' : `tenant ${tenant}`);

/**
 * `approve_tool_call`: an approver signs one call of one of `tools` for another
 * principal of its own tenant (or of any tenant, holding one of the roles the
 * tokens accept across tenants). Only the `approver` role may call it, so the
 * requester cannot approve itself; its input is the `approvalRequest` of the
 * requester's `approval_required` refusal, its result the token the requester presents.
 */
export function registerApproveTool(guard: ToolGuard, tokens: ApprovalTokens, tools: readonly [string, ...string[]]): void {
  guard.registerTool(
    'approve_tool_call',
    {
      title: 'Approve a tool call',
      description: 'Approvers only: approve one call of a sensitive tool for another user. Pass the approvalRequest of their refusal; hand them the token.',
      inputSchema: z.object({
        tool: z.enum(tools),
        arguments: z.record(z.string(), z.unknown()),
        requester: z.object({ subject: z.string().min(1), tenant: z.string().min(1).optional() }),
      }),
      outputSchema: z.object({ token: z.string(), expiresAt: z.string() }),
    },
    { roles: ['approver'] },
    async (request, ctx) => {
      // The guard admitted the call, so there is a principal.
      const approver = guard.principalOf(ctx)!;
      const refusal = tokens.refusalFor(request, approver);
      if (refusal === 'own_call') {
        return { content: [{ type: 'text', text: 'You cannot approve your own calls: ask another approver.' }], isError: true };
      }
      if (refusal === 'other_tenant') {
        const text = `You can approve calls of your own tenant only (${tenantOf(approver.tenant)}); this call is by a user of ${tenantOf(request.requester.tenant)}: ask an approver of that tenant.`;
        return { content: [{ type: 'text', text }], isError: true };
      }
      const { token, expiresAt } = tokens.issue(request, approver);
      return {
        content: [
          {
            type: 'text',
            text: `Approved ${request.tool} for ${request.requester.subject} until ${expiresAt.toISOString()}, once. Token: ${token}`,
          },
        ],
        structuredContent: { token, expiresAt: expiresAt.toISOString() },
      };
    },
  );
}
