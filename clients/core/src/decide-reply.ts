import { outcomeOf } from './algorithms/outcome.js';
import type { GroupDecision, LimitOutcome, Memo } from './types.js';

/**
 * A decision's reply, as the store's decide step returns it and as a
 * remembered decision (idempotent Allow) is kept: per limit allowed (1|0),
 * retry_after_ms, remaining, reset_after_ms, delay_ms, then the time it was
 * decided at; a whole-request flag first.
 */
const REPLY = 'decide reply';

/** A whole decision in the form the driver remembers it: its reply's fields, space-separated. */
export function encodeRemembered({ outcomes, nowMs }: GroupDecision): string {
  const all = outcomes.every((o) => o.allowed) ? 1 : 0;
  const fields = outcomes.flatMap((o) => [o.allowed ? 1 : 0, o.retryAfterMs, String(o.remaining), o.resetAfterMs, o.delayMs ?? 0]);
  return [all, ...fields, nowMs].join(' ');
}

/** A remembered decision back to outcomes ('pending': not stored yet). */
export function parseRemembered(stored: string, count: number): GroupDecision {
  if (stored === 'pending') return { outcomes: [], nowMs: 0, replayed: true, pending: true };
  const fields = stored.split(' ').map((field, i) => ((i - 3) % 5 === 0 ? field : Number(field)));
  return { ...parseDecideReply(fields, count), replayed: true };
}

/** Parses the driver's reply; throws if it is not the documented shape. */
export function parseDecideReply(reply: unknown, count: number, memo?: Memo): GroupDecision {
  if (Array.isArray(reply) && reply[0] === 'replay' && memo !== undefined) return parseRemembered(reply.slice(1).join(' '), memo.count);
  if (!Array.isArray(reply) || reply.length !== 2 + 5 * count) {
    throw new Error(`${REPLY}: expected a reply of ${2 + 5 * count} elements, got ${JSON.stringify(reply)}`);
  }
  // A plain loop: Array.from({ length }, fn) took about a fifth of the service's reading of a batch reply.
  const outcomes: LimitOutcome[] = [];
  for (let at = 1; at < 1 + 5 * count; at += 5) {
    // Text in a lone call's reply (Redis would truncate a number), the exact number in a batch's.
    const field = reply[at + 2];
    const remaining = typeof field === 'string' ? Number(field) : typeof field === 'number' ? field : Number.NaN;
    if (!Number.isFinite(remaining)) {
      throw new Error(`${REPLY}: reply[${at + 2}] is not a number or number string: ${String(field)}`);
    }
    outcomes.push(outcomeOf(integer(reply, at) === 1, integer(reply, at + 1), remaining, integer(reply, at + 3), integer(reply, at + 4)));
  }
  return { outcomes, nowMs: integer(reply, 1 + 5 * count) };
}

function integer(reply: unknown[], index: number): number {
  const value = reply[index];
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new Error(`${REPLY}: reply[${index}] is not an integer: ${String(value)}`);
  }
  return value;
}
