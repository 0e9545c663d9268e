import { InvalidArgumentError } from './errors.js';
import type { PolicySet } from './types.js';
import { checkId, validatePeek, type ValidRequest } from './validate-request.js';

/** Settle's input: the reservation's policy, identity and request_id, and what the work really cost. */
export interface SettleInput {
  policy: string;
  identity: Readonly<Record<string, string>>;
  requestId: string;
  actualCost: number;
}

/** A settlement that passed validation: the request as its reservation's Allow named it (cost 0), and the actual cost. */
export interface ValidSettle {
  request: ValidRequest;
  actualCost: number;
}

/**
 * Checks a settlement before anything touches the store: the policy and
 * identity as for GetQuota, a request_id (required), and an actual cost that
 * is finite, not negative and, for a limit that counts whole units (the
 * windows), whole. A cost above a limit's capacity is not refused: the
 * charge stops at one capacity of debt (docs/policies.md, "Reservations").
 */
export function validateSettle(policies: PolicySet, input: SettleInput): ValidSettle {
  const request = validatePeek(policies, { policy: input.policy, identity: input.identity });
  if (input.requestId === '') throw new InvalidArgumentError('request_id', 'must not be empty: it names the reservation to settle');
  checkId('request_id', input.requestId);
  const actual = input.actualCost;
  if (!Number.isFinite(actual)) throw new InvalidArgumentError('actual_cost', `must be a finite number, got ${actual}`);
  if (actual < 0) throw new InvalidArgumentError('actual_cost', `must not be negative, got ${actual}`);
  if (!Number.isInteger(actual)) {
    for (const limit of request.limits) {
      // A fraction of a unit within the capacity: only a limit that counts whole units refuses it.
      const fraction = Math.min(0.5, limit.algorithm.capacity(limit.params) / 4);
      if (limit.algorithm.rejectCost(limit.params, fraction) !== undefined) {
        throw new InvalidArgumentError(
          'actual_cost',
          `must be a whole number for limit "${limit.name}" (${limit.algorithm.name}) of policy "${request.policy.name}", got ${actual}`,
        );
      }
    }
  }
  // -0 is 0: the record and the answer carry no sign of nothing.
  return { request: { ...request, requestId: input.requestId }, actualCost: actual === 0 ? 0 : actual };
}
