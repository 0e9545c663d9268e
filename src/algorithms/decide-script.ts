import { outcomeOf, readLua, type LimitOutcome } from './algorithm.js';
import type { Limit } from '../config/policies.js';
import { algorithms } from './registry.js';

/**
 * The one Redis script that decides requests: every algorithm's Lua function
 * plus the driver (decide.lua), assembled once at load time. One script for
 * all algorithms lets a request with several limits of different algorithms
 * be decided all-or-nothing in one call when their keys share a slot.
 */
export const DECIDE_SCRIPT_NAME = 'quotaDecide';

export const decideLua = [
  'local A, R = {}, {}',
  // do ... end: file-level locals of one algorithm stay out of the others' way.
  ...Object.values(algorithms).map((algorithm) => `do\n${algorithm.lua}\nend`),
  readLua(import.meta.url, './decide.lua'),
].join('\n');

/**
 * 'spend' writes when every limit allows; 'peek' decides and writes nothing;
 * 'check' decides and never spends; 'refund' gives back what a spend of the
 * same calls took (see decide.lua).
 */
export type DecideMode = 'spend' | 'peek' | 'check' | 'refund';

/** The outcomes of one driver call and the time (unix ms, the store's clock) it decided at. */
export interface GroupDecision {
  outcomes: LimitOutcome[];
  nowMs: number;
}

/** One limit of a request: which limit, whose key, how many units. */
export interface LimitCall {
  limit: Limit;
  identityKey: string;
  cost: number;
}

/** KEYS and ARGV of the driver, without `numkeys` (ioredis adds it from the first element). */
export function decideArguments(calls: readonly LimitCall[], mode: DecideMode, nowMs?: number, spentAtMs?: number): { keys: string[]; args: string[] } {
  if (mode === 'refund' && spentAtMs === undefined) throw new Error('refund needs the time of the spend');
  const keys: string[] = [];
  const args = [mode, nowMs === undefined ? '' : String(nowMs), String(calls.length), spentAtMs === undefined ? '' : String(spentAtMs)];
  for (const { limit, identityKey, cost } of calls) {
    const limitKeys = limit.algorithm.scriptKeys(identityKey, limit.params);
    const limitArgs = limit.algorithm.scriptArgs(limit.params, cost);
    keys.push(...limitKeys);
    args.push(limit.algorithm.name, String(limitKeys.length), String(limitArgs.length), ...limitArgs);
  }
  return { keys, args };
}

/** Parses the driver's reply; throws if it is not the documented shape. */
export function parseDecideReply(reply: unknown, count: number): GroupDecision {
  if (!Array.isArray(reply) || reply.length !== 2 + 5 * count) {
    throw new Error(`${DECIDE_SCRIPT_NAME}: expected a reply of ${2 + 5 * count} elements, got ${JSON.stringify(reply)}`);
  }
  const outcomes = Array.from({ length: count }, (_, i) => {
    const at = 1 + 5 * i;
    const remaining = reply[at + 2];
    if (typeof remaining !== 'string' || Number.isNaN(Number(remaining))) {
      throw new Error(`${DECIDE_SCRIPT_NAME}: reply[${at + 2}] is not a number string: ${String(remaining)}`);
    }
    return outcomeOf(integer(reply, at) === 1, integer(reply, at + 1), Number(remaining), integer(reply, at + 3), integer(reply, at + 4));
  });
  return { outcomes, nowMs: integer(reply, 1 + 5 * count) };
}

function integer(reply: unknown[], index: number): number {
  const value = reply[index];
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new Error(`${DECIDE_SCRIPT_NAME}: reply[${index}] is not an integer: ${String(value)}`);
  }
  return value;
}
