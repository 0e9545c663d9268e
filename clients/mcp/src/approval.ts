import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ElicitRequestFormParams } from '@modelcontextprotocol/sdk/types.js';
import type { ApprovalOutcome } from './audit.js';
import type { Principal } from './principal.js';

/** What an approver is asked: which tool, for whom, and the text a human reads. */
export interface ApprovalRequest {
  tool: string;
  principal: Principal;
  message: string;
  signal: AbortSignal;
}

/**
 * An out-of-band approver (a chat message, a ticket, a push notification) for
 * clients that cannot show an elicitation form. It must resolve to a human's answer.
 */
export interface Approver {
  approve(request: ApprovalRequest): Promise<'approved' | 'declined' | 'cancelled'>;
}

const APPROVAL_SCHEMA: ElicitRequestFormParams['requestedSchema'] = {
  type: 'object',
  properties: { approve: { type: 'boolean', title: 'Approve', description: 'Run this tool call now' } },
  required: ['approve'],
};

/**
 * Asks a human through MCP elicitation when the connected client declared the
 * form capability, else through the out-of-band approver, else refuses
 * ('unsupported'). Only an explicit yes approves: accept with approve=false is a decline.
 *
 * Elicitation proves only that the connected client answered yes: a script, or the
 * model's own host, can answer for itself. It does not prove a second person
 * approved; for that, use signed approvals (checkSignedApproval).
 */
export async function askApproval(
  server: McpServer,
  request: ApprovalRequest & { relatedRequestId: string | number },
  approver: Approver | undefined,
  timeoutMs: number,
): Promise<Extract<ApprovalOutcome, 'approved' | 'declined' | 'cancelled' | 'unsupported' | 'failed'>> {
  if (server.server.getClientCapabilities()?.elicitation?.form !== undefined) {
    try {
      const answer = await server.server.elicitInput(
        { mode: 'form', message: request.message, requestedSchema: APPROVAL_SCHEMA },
        // Related to the tools/call, so Streamable HTTP sends it on that call's stream.
        // A human answers: the SDK's 60 s request default is too short for that.
        { relatedRequestId: request.relatedRequestId, signal: request.signal, timeout: timeoutMs },
      );
      if (answer.action === 'accept') return answer.content?.['approve'] === true ? 'approved' : 'declined';
      return answer.action === 'decline' ? 'declined' : 'cancelled';
    } catch {
      return 'failed';
    }
  }
  if (approver === undefined) return 'unsupported';
  try {
    return await approver.approve(request);
  } catch {
    return 'failed';
  }
}
