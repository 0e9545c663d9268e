import { APPROVAL_META_KEY, type ApprovalParty, type ApprovalRequestDetails, type ApprovalTokenProblem, type ApprovalTokens } from './approval-token.js';
import type { Principal } from './principal.js';

/** The outcome of the signed approval step: the approver, or why the call is refused. */
export type SignedApprovalOutcome =
  | { outcome: 'approved'; approver: ApprovalParty }
  | { outcome: 'required'; request: ApprovalRequestDetails }
  | { outcome: 'invalid'; problem: ApprovalTokenProblem }
  | { outcome: 'unsupported' };

/**
 * The strong approval path: the call carries a token an approver (another
 * principal) signed for exactly this tool, these arguments and this requester.
 * Without one, the refusal says what the approver must approve.
 */
export function checkSignedApproval(
  tokens: ApprovalTokens | undefined,
  call: { tool: string; args: unknown; principal: Principal; meta: Record<string, unknown> | undefined },
): SignedApprovalOutcome {
  if (tokens === undefined) return { outcome: 'unsupported' };
  const requester =
    call.principal.tenant === undefined ? { subject: call.principal.subject } : { subject: call.principal.subject, tenant: call.principal.tenant };
  const request: ApprovalRequestDetails = { tool: call.tool, arguments: call.args ?? {}, requester };
  const token = call.meta?.[APPROVAL_META_KEY];
  if (token === undefined) return { outcome: 'required', request };
  if (typeof token !== 'string') return { outcome: 'invalid', problem: 'malformed' };
  const redeemed = tokens.redeem(token, request);
  return 'problem' in redeemed ? { outcome: 'invalid', problem: redeemed.problem } : { outcome: 'approved', approver: redeemed.approver };
}
