import type { Logger } from 'pino';
import type { AuditRecord } from './audit.js';
import type { GuardQuota, Lease } from './quota-decider.js';
import { refusals } from './refusals.js';
import type { ToolPolicy } from './tool-policy.js';
import type { ToolResult } from './tool-result.js';

type ConcurrencyStep = NonNullable<AuditRecord['steps']['concurrency']>;

/** The in-flight step's outcome: a lease to hold while the call runs, or a refusal. */
export type InFlight = { lease: Lease; step: ConcurrencyStep } | { refusal: ToolResult; step: ConcurrencyStep; reason: string };

/**
 * Acquires the lease of a tool's `concurrency` policy. Fails closed unless the
 * tool says `failureMode: 'open'`: a lease granted without the service is
 * counted by no other replica.
 */
export async function acquireInFlight(
  quota: GuardQuota,
  tool: string,
  cap: NonNullable<ToolPolicy<unknown>['concurrency']>,
  identity: Record<string, string>,
): Promise<InFlight> {
  const policy = cap.policy;
  let lease: Lease;
  try {
    // Checked when the tool was registered.
    lease = await quota.acquire!({ policy, identity }, { onUnavailable: cap.failureMode === 'open' ? 'fail_open' : 'fail_closed' });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { refusal: refusals.quotaError(tool, policy, message), step: { outcome: 'error', policy }, reason: `in-flight check failed: ${message}` };
  }
  const { decision } = lease;
  if (decision.source === 'fail_open' || decision.source === 'fail_closed') {
    if (!lease.acquired) {
      return {
        refusal: refusals.quotaUnavailable(tool, policy),
        step: { outcome: 'fail_closed', policy, source: decision.source },
        reason: 'quota service unavailable, in-flight cap failing closed',
      };
    }
    return { lease, step: { outcome: 'fail_open', policy, source: decision.source } };
  }
  if (!lease.acquired) {
    return {
      refusal: refusals.tooManyInFlight(tool, policy, decision.deniedBy, decision.retryAfterMs),
      step: { outcome: 'denied', policy, source: decision.source, deniedBy: decision.deniedBy, retryAfterMs: decision.retryAfterMs },
      reason: `too many calls in flight (${decision.deniedBy})`,
    };
  }
  return { lease, step: { outcome: 'acquired', policy, source: decision.source } };
}

/** Releases the call's lease and notes how it ended in the audit step; never throws. */
export async function releaseInFlight(lease: Lease, step: ConcurrencyStep, logger: Logger, tool: string): Promise<void> {
  if (lease.signal.aborted) step.lost = true;
  try {
    step.release = (await lease.release()).status;
  } catch (error) {
    step.release = 'failed';
    logger.error({ err: error, tool, policy: step.policy }, 'in-flight lease could not be released');
  }
}
