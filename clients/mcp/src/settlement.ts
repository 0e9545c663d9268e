import type { Logger } from 'pino';
import type { AuditRecord } from './audit.js';
import type { Reservation } from './quota-decider.js';
import type { ToolPolicy } from './tool-policy.js';
import type { ToolResult } from './tool-result.js';

type QuotaStep = AuditRecord['steps']['quota'];

/**
 * What a finished call really cost: the tool's `actual(result)`. A result with
 * isError settles what `actual` reports, else 0 (nothing reported, nothing
 * done); a call that threw (no result) settles 0; a successful result whose
 * `actual` reports nothing keeps the estimate (the tool said nothing cheaper).
 */
export function actualCost<Args>(
  quota: NonNullable<ToolPolicy<Args>['quota']>,
  reservation: Reservation,
  result: ToolResult | undefined,
  args: Args,
  logger: Logger,
  tool: string,
): number {
  if (result === undefined) return 0;
  let reported: number | undefined;
  try {
    reported = quota.actual?.(result, args);
  } catch (error) {
    logger.error({ err: error, tool }, 'the tool policy could not compute the actual cost');
  }
  if (typeof reported === 'number' && Number.isFinite(reported) && reported >= 0) return reported;
  if (reported !== undefined) logger.error({ tool, reported: String(reported) }, 'the tool policy reported an actual cost that is not a finite number >= 0');
  return result.isError === true ? 0 : reservation.estimate;
}

/** Settles the reservation and writes estimate, actual and the settled difference into the audit step; never throws. */
export async function settleReservation(reservation: Reservation, actual: number, step: QuotaStep, logger: Logger, tool: string): Promise<void> {
  step.actual = actual;
  try {
    const settlement = await reservation.settle(actual);
    step.settlement = settlement.status;
    step.delta = settlement.delta;
    step.estimate = settlement.estimate;
    if (settlement.status === 'unavailable')
      logger.warn({ tool, policy: step.policy }, 'reservation not settled: quota service unavailable, the estimate stays spent');
  } catch (error) {
    step.settlement = 'failed';
    step.delta = 0;
    logger.error({ err: error, tool, policy: step.policy }, 'reservation could not be settled');
  }
}
