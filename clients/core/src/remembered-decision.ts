import { outcomeOfFields } from './algorithms/outcome.js';
import type { GroupDecision, LimitOutcome } from './types.js';

/**
 * A remembered decision (idempotent Allow), as the embedded store and the
 * Redis driver keep it under a request id: space-separated, a whole-request
 * flag, per limit allowed (1|0), retry_after_ms, remaining, reset_after_ms,
 * delay_ms, the time it was decided at, then the reservation's fields.
 */
const REMEMBERED = 'remembered decision';

/** The reservation a remembered decision carries (docs/keys.md): its cost and when each limit spent it. */
export interface Reservation {
  estimate: number;
  /** Per limit of the request, in the policy's order. */
  spentAtMs: readonly number[];
}

/**
 * A whole decision in the form the driver remembers it: its reply's fields,
 * then the reservation's (the cost, each limit's spend time, and '-' until
 * settled), space-separated.
 */
export function encodeRemembered({ outcomes, nowMs }: GroupDecision, { estimate, spentAtMs }: Reservation): string {
  const all = outcomes.every((o) => o.allowed) ? 1 : 0;
  const fields = outcomes.flatMap((o) => [
    o.allowed ? 1 : 0,
    o.retryAfterMs,
    String(o.remaining),
    o.resetAfterMs,
    o.leasesExpired ? -o.leasesExpired : (o.delayMs ?? 0),
  ]);
  return [all, ...fields, nowMs, estimate, ...spentAtMs, '-'].join(' ');
}

/** A remembered decision back to outcomes ('pending': not stored yet); the reservation's fields after them are not part of it. */
export function parseRemembered(stored: string, count: number): GroupDecision {
  if (stored === 'pending') return { outcomes: [], nowMs: 0, replayed: true, pending: true };
  const all = stored.split(' ');
  if (all.length !== 6 * count + 4) throw new Error(`${REMEMBERED}: a remembered decision of ${count} limits has ${6 * count + 4} fields, got ${all.length}`);
  const outcomes: LimitOutcome[] = [];
  for (let at = 1; at < 1 + 5 * count; at += 5) {
    const outcome = outcomeOfFields(integer(all, at), integer(all, at + 1), number(all, at + 2), integer(all, at + 3), integer(all, at + 4));
    // What the first call dropped is not dropped again by its replay.
    delete outcome.leasesExpired;
    outcomes.push(outcome);
  }
  return { outcomes, nowMs: integer(all, 1 + 5 * count), replayed: true };
}

function number(fields: readonly string[], index: number): number {
  const value = Number(fields[index]);
  if (!Number.isFinite(value)) throw new Error(`${REMEMBERED}: field ${index} is not a number: ${String(fields[index])}`);
  return value;
}

function integer(fields: readonly string[], index: number): number {
  const value = number(fields, index);
  if (!Number.isInteger(value)) throw new Error(`${REMEMBERED}: field ${index} is not an integer: ${String(fields[index])}`);
  return value;
}
