import { outcomeOf } from './algorithms/outcome.js';
import type { GroupDecision, LimitOutcome, Memo } from './types.js';

/**
 * A decision's reply, as the store's decide step returns it and as a
 * remembered decision (idempotent Allow) is kept: per limit allowed (1|0),
 * retry_after_ms, remaining, reset_after_ms, delay_ms, then the time it was
 * decided at; a whole-request flag first.
 */
const REPLY = 'decide reply';

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
  if (all.length !== 6 * count + 4) throw new Error(`${REPLY}: a remembered decision of ${count} limits has ${6 * count + 4} fields, got ${all.length}`);
  const fields = all.slice(0, 2 + 5 * count).map((field, i) => ((i - 3) % 5 === 0 ? field : Number(field)));
  const decision = parseDecideReply(fields, count);
  // What the first call dropped is not dropped again by its replay.
  for (const outcome of decision.outcomes) delete outcome.leasesExpired;
  return { ...decision, replayed: true };
}

const SETTLE_STATUSES = new Set(['unknown', 'pending', 'denied', 'settled', 'applied']);

/**
 * The reply of mode 'settle' (decide.lua): { 'settle', status [, estimate,
 * actual, count, spent_at x count, then a decision reply of `calls` limits] },
 * every element text.
 */
export function parseSettleReply(reply: unknown, calls: number): GroupDecision {
  const malformed = () => new Error(`settle reply: expected the settle reply of ${calls} limits, got ${JSON.stringify(reply)}`);
  if (!Array.isArray(reply) || reply[0] !== 'settle' || !SETTLE_STATUSES.has(reply[1])) throw malformed();
  const status = reply[1] as NonNullable<GroupDecision['settlement']>['status'];
  if (status !== 'settled' && status !== 'applied') {
    if (reply.length !== 2) throw malformed();
    return { outcomes: [], nowMs: 0, settlement: { status, estimate: 0, actualCost: 0, spentAtMs: [] } };
  }
  const count = Number(reply[4]);
  if (!Number.isInteger(count) || count < 1 || reply.length !== 5 + count + 2 + 5 * calls) throw malformed();
  const spentAtMs = reply.slice(5, 5 + count).map(Number);
  const estimate = Number(reply[2]);
  const actualCost = Number(reply[3]);
  if (!Number.isFinite(estimate) || !Number.isFinite(actualCost) || spentAtMs.some((t) => !Number.isFinite(t))) throw malformed();
  // The decision's fields as numbers, but `remaining`, which parseDecideReply reads from its text.
  const decision = reply.slice(5 + count).map((field, i) => ((i - 3) % 5 === 0 ? field : Number(field)));
  return { ...parseDecideReply(decision, calls), settlement: { status, estimate, actualCost, spentAtMs } };
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
    // delay_ms below 0: a lease limit's expired leases dropped (LimitOutcome.leasesExpired).
    const delay = integer(reply, at + 4);
    const outcome = outcomeOf(integer(reply, at) === 1, integer(reply, at + 1), remaining, integer(reply, at + 3), delay);
    if (delay < 0) outcome.leasesExpired = -delay;
    outcomes.push(outcome);
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
