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

/** The outcome of asking for approval; 'unsupported': no way to ask a human. */
export type AskOutcome = Extract<ApprovalOutcome, 'approved' | 'declined' | 'cancelled' | 'unsupported' | 'failed'>;

/** The form an approval elicitation shows: one yes/no field. */
export const APPROVAL_SCHEMA = {
  type: 'object' as const,
  properties: { approve: { type: 'boolean' as const, title: 'Approve', description: 'Run this tool call now' } },
  required: ['approve'],
};

/** Only an explicit yes approves: accept with approve=false is a decline. */
export function outcomeOfAnswer(answer: { action: string; content?: Record<string, unknown> | undefined }): AskOutcome {
  if (answer.action === 'accept') return answer.content?.['approve'] === true ? 'approved' : 'declined';
  return answer.action === 'decline' ? 'declined' : 'cancelled';
}

/** Asks the out-of-band approver, when there is one ('unsupported' otherwise). */
export async function askApprover(approver: Approver | undefined, request: ApprovalRequest): Promise<AskOutcome> {
  if (approver === undefined) return 'unsupported';
  try {
    return await approver.approve(request);
  } catch {
    return 'failed';
  }
}
