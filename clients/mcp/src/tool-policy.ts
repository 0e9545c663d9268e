/**
 * What the quota service does when it cannot be asked: 'open' runs the tool,
 * 'closed' refuses it. A public read tool may fail open; a costly or
 * strictly metered one should fail closed.
 */
export type FailureMode = 'open' | 'closed';

import type { ToolResult } from './tool-result.js';

/** The guard's rules for one tool. Every field is optional: {} guards nothing but audits. */
export interface ToolPolicy<Args> {
  /** Scopes the principal must all hold. */
  scopes?: readonly string[];
  /** Roles of which the principal must hold at least one. */
  roles?: readonly string[];
  /**
   * A sensitive tool: each call is approved before anything else is spent.
   * By default the connected client is asked (elicitation, else the guard's
   * approver); `message` builds the text the human reads (default: tool name and
   * arguments). That proves only that the client answered yes. `signed: true`
   * instead requires a token another principal signed for this exact call
   * (ApprovalTokens, the guard's `approvalTokens`): the caller cannot approve itself.
   */
  approval?: true | { message?: (args: Args) => string; signed?: boolean };
  quota?: {
    /** Policy name in the quota service's policy file. */
    policy: string;
    /** Units one call spends: a number, or computed from the validated arguments. Default 1. Not with `estimate`. */
    cost?: number | ((args: Args) => number);
    /**
     * Reserve, then settle: units reserved before the call (a number, or from the
     * validated arguments), when the real cost is known only from the result (rows
     * changed, tokens a model used). Needs `actual` and a quota client with reserve().
     */
    estimate?: number | ((args: Args) => number);
    /**
     * What the call really cost, from its result: the reservation is settled with it
     * (the difference given back or charged). A result with `isError` settles what
     * this returns, or 0 when it returns nothing; a tool body that throws settles 0
     * (return an `isError` result with the count if work can fail partway). A
     * successful result for which this returns nothing (or throws) keeps the estimate.
     */
    actual?: (result: ToolResult, args: Args) => number | undefined;
    /**
     * Overrides the quota client's failure policy for this tool when the service
     * cannot be reached. Unset: the client's decision stands.
     */
    failureMode?: FailureMode;
  };
  /**
   * A cap on calls in flight: each call holds a concurrency lease of this policy
   * (a `concurrency` limit, e.g. per tenant) from before the quota step until it
   * has ended, whether it returned, threw or was cancelled. Needs a quota client
   * with acquire().
   */
  concurrency?: {
    /** Policy name; it has a `concurrency` limit. */
    policy: string;
    /**
     * When the quota service cannot be asked. Default 'closed': a lease granted
     * without the service is counted by no other replica, so the cap would not hold.
     */
    failureMode?: FailureMode;
  };
}
