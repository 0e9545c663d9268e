/**
 * What the quota service does when it cannot be asked: 'open' runs the tool,
 * 'closed' refuses it. A public read tool may fail open; a costly or
 * strictly metered one should fail closed.
 */
export type FailureMode = 'open' | 'closed';

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
    /** Units one call spends: a number, or computed from the validated arguments. Default 1. */
    cost?: number | ((args: Args) => number);
    /**
     * Overrides the quota client's failure policy for this tool when the service
     * cannot be reached. Unset: the client's decision stands.
     */
    failureMode?: FailureMode;
  };
}
