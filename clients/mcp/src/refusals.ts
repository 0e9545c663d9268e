import { APPROVAL_META_KEY, type ApprovalRequestDetails, type ApprovalTokenProblem } from './approval-token.js';
import type { ToolResult } from './tool-result.js';

/**
 * The namespaced `_meta` key carrying the machine-readable reason of a refusal.
 * Not in structuredContent: SDK clients (1.32 and 2.x) validate structuredContent
 * against the tool's outputSchema, so a denial there could fail the call.
 */
export const REFUSAL_META_KEY = 'dev.quota-service/refusal';

export type RefusalReason =
  | 'not_authenticated'
  | 'not_permitted'
  | 'approval_declined'
  | 'approval_cancelled'
  | 'approval_unavailable'
  | 'approval_required'
  | 'approval_invalid'
  | 'rate_limited'
  | 'too_many_in_flight'
  | 'quota_unavailable'
  | 'quota_error';

export interface Refusal {
  reason: RefusalReason;
  /** Whether the same call may succeed later without anything else changing. */
  retryable: boolean;
  retryAfterMs?: number;
  policy?: string;
  /** The limit that rejected the call (rate_limited and too_many_in_flight only). */
  limit?: string;
  /** What an approver must approve (approval_required only). */
  approvalRequest?: ApprovalRequestDetails;
  /** Why the presented approval token was not accepted (approval_invalid only). */
  problem?: ApprovalTokenProblem;
}

/** A tool error result: a text a model can act on, and the details under REFUSAL_META_KEY. */
export function refusalResult(text: string, refusal: Refusal): ToolResult {
  return { content: [{ type: 'text', text }], isError: true, _meta: { [REFUSAL_META_KEY]: refusal } };
}

/** Whole seconds to wait, as HTTP Retry-After would say it: max(1, ceil(ms / 1000)). */
export function retryAfterSeconds(retryAfterMs: number): number {
  return Math.max(1, Math.ceil(retryAfterMs / 1000));
}

export const refusals = {
  notAuthenticated: (tool: string) =>
    refusalResult(`Tool ${tool} needs an authenticated caller. Nothing was executed.`, {
      reason: 'not_authenticated',
      retryable: false,
    }),
  notPermitted: (tool: string) =>
    refusalResult(`Tool ${tool} is not permitted for this caller. Nothing was executed.`, {
      reason: 'not_permitted',
      retryable: false,
    }),
  approval: (tool: string, outcome: 'declined' | 'cancelled' | 'unsupported' | 'failed') => {
    const why = {
      declined: 'the approval was declined',
      cancelled: 'the approval request was cancelled',
      unsupported: 'no way to ask a human for approval is available',
      failed: 'the approval request failed',
    }[outcome];
    const reason: RefusalReason = outcome === 'declined' ? 'approval_declined' : outcome === 'cancelled' ? 'approval_cancelled' : 'approval_unavailable';
    return refusalResult(`Tool ${tool} needs human approval and ${why}. Nothing was executed.`, {
      reason,
      retryable: outcome !== 'declined' && outcome !== 'unsupported',
    });
  },
  approvalRequired: (tool: string, request: ApprovalRequestDetails) =>
    refusalResult(
      `Tool ${tool} needs a signed approval from another principal (an approver). Nothing was executed. ` +
        `Ask an approver to approve the approvalRequest in _meta["${REFUSAL_META_KEY}"], then call again with the token under _meta["${APPROVAL_META_KEY}"].`,
      { reason: 'approval_required', retryable: false, approvalRequest: request },
    ),
  approvalInvalid: (tool: string, problem: ApprovalTokenProblem) => {
    const why = {
      malformed: 'is not an approval token',
      bad_signature: 'has an invalid signature',
      expired: 'has expired',
      other_call: 'approves another call (tool, arguments or requester differ)',
      other_tenant: "was signed by an approver of another tenant (ask an approver of the requester's tenant)",
      used: 'was already used',
    }[problem];
    return refusalResult(`The approval token for tool ${tool} ${why}. Nothing was executed.`, { reason: 'approval_invalid', retryable: false, problem });
  },
  rateLimited: (tool: string, policy: string, limit: string, retryAfterMs: number) =>
    refusalResult(`Rate limit reached for tool ${tool} (policy ${policy}). Nothing was executed. Retry after ${retryAfterSeconds(retryAfterMs)} s.`, {
      reason: 'rate_limited',
      retryable: true,
      retryAfterMs,
      policy,
      limit,
    }),
  tooManyInFlight: (tool: string, policy: string, limit: string, retryAfterMs: number) =>
    refusalResult(
      `Too many tool calls in progress for this caller (policy ${policy}); tool ${tool} was not executed. Retry after ${retryAfterSeconds(retryAfterMs)} s, when a call has finished.`,
      { reason: 'too_many_in_flight', retryable: true, retryAfterMs, policy, limit },
    ),
  quotaUnavailable: (tool: string, policy: string) =>
    refusalResult(
      `The quota service could not be reached for tool ${tool} (policy ${policy}), and this tool fails closed. Nothing was executed. Retry later.`,
      { reason: 'quota_unavailable', retryable: true, policy },
    ),
  quotaError: (tool: string, policy: string, message: string) =>
    refusalResult(`The quota check for tool ${tool} (policy ${policy}) was refused: ${message}. Nothing was executed.`, {
      reason: 'quota_error',
      retryable: false,
      policy,
    }),
};
