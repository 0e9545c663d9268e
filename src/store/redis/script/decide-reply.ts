import { type GroupDecision, type LimitOutcome, type Memo, outcomeOfFields, parseRemembered } from '@quota-service/core';

/**
 * The driver's reply (decide.lua): a whole-request flag, then per limit
 * allowed (1|0), retry_after_ms, remaining, reset_after_ms, delay_ms, then
 * the time it was decided at (unix ms, Redis's clock).
 */
const REPLY = 'decide reply';

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
  // A plain loop, not Array.from({ length }, fn): this runs per decision.
  const outcomes: LimitOutcome[] = [];
  for (let at = 1; at < 1 + 5 * count; at += 5) {
    // Text in a lone call's reply (Redis would truncate a number), the exact number in a batch's.
    const field = reply[at + 2];
    const remaining = typeof field === 'string' ? Number(field) : typeof field === 'number' ? field : Number.NaN;
    if (!Number.isFinite(remaining)) {
      throw new Error(`${REPLY}: reply[${at + 2}] is not a number or number string: ${String(field)}`);
    }
    outcomes.push(outcomeOfFields(integer(reply, at), integer(reply, at + 1), remaining, integer(reply, at + 3), integer(reply, at + 4)));
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
