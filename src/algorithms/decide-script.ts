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

/**
 * int(n) and g17(x): numbers as the text Redis stores, as string.format gives
 * it, remembered within the script call (text.lua). Every algorithm uses them,
 * so a script running an algorithm's .lua defines them first.
 */
export const textLua = readLua(import.meta.url, './text.lua');

export const decideLua = [
  'local A, R = {}, {}',
  textLua,
  // define(name) runs one algorithm's file, defining A.<name> and R.<name>, and
  // the driver calls it once per algorithm the call uses: defining all six
  // decisions and refunds on every call cost Redis CPU on each decision
  // (docs/benchmarks.md). Each file sits in its own branch, so its file-level
  // locals stay out of the others' way as they did in a do ... end block.
  'local function define(name)',
  ...Object.values(algorithms).map((algorithm, i) => `${i === 0 ? 'if' : 'elseif'} name == '${algorithm.name}' then\n${algorithm.lua}`),
  'end',
  'end',
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
  /** Idempotent Allow: the remembered decision of an earlier call with the same request id (nothing spent now). */
  replayed?: boolean;
  /** Replayed, but the earlier cross-slot call has not stored its decision yet. */
  pending?: boolean;
}

/** Where and how long a decision with a request id is remembered (docs/keys.md). */
export interface Memo {
  key: string;
  ttlMs: number;
  /** Store 'pending' now, the whole decision later (a cross-slot request's first group). */
  claim?: boolean;
  /** How many limits a remembered decision holds (the whole request's). */
  count: number;
}

export interface DecideOptions {
  /** Mode 'refund': the time the spend being undone ran at. */
  spentAtMs?: number;
  /** Mode 'spend': answer a remembered decision, or remember this one. */
  memo?: Memo;
}

/** One limit of a request: which limit, whose key, how many units. */
export interface LimitCall {
  limit: Limit;
  identityKey: string;
  cost: number;
}

/** KEYS and ARGV of the driver, without `numkeys` (ioredis adds it from the first element). */
export function decideArguments(calls: readonly LimitCall[], mode: DecideMode, nowMs?: number, options: DecideOptions = {}): ScriptCall {
  const { spentAtMs, memo } = options;
  if (mode === 'refund' && spentAtMs === undefined) throw new Error('refund needs the time of the spend');
  const keys: string[] = [];
  const args = [
    mode,
    nowMs === undefined ? '' : String(nowMs),
    String(calls.length),
    spentAtMs === undefined ? '' : String(spentAtMs),
    memo === undefined ? '' : String(memo.ttlMs),
    memo?.claim ? 'claim' : '',
  ];
  for (const { limit, identityKey, cost } of calls) {
    const limitKeys = limit.algorithm.scriptKeys(identityKey, limit.params);
    const limitArgs = limit.algorithm.scriptArgs(limit.params, cost);
    keys.push(...limitKeys);
    args.push(limit.algorithm.name, String(limitKeys.length), String(limitArgs.length), ...limitArgs);
  }
  if (memo !== undefined) keys.push(memo.key);
  return { keys, args };
}

/** One driver call's KEYS and ARGV (decideArguments, rememberArguments). */
export interface ScriptCall {
  keys: string[];
  args: string[];
}

/** KEYS and ARGV that store `value` as the remembered decision ('' forgets it). */
export function rememberArguments(memo: Memo, value: string): ScriptCall {
  return { keys: [memo.key], args: ['remember', '', '0', '', String(memo.ttlMs), value] };
}

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
    throw new Error(`${DECIDE_SCRIPT_NAME}: expected a reply of ${2 + 5 * count} elements, got ${JSON.stringify(reply)}`);
  }
  // A plain loop: Array.from({ length }, fn) took about a fifth of the service's reading of a batch reply.
  const outcomes: LimitOutcome[] = [];
  for (let at = 1; at < 1 + 5 * count; at += 5) {
    // Text in a lone call's reply (Redis would truncate a number), the exact number in a batch's.
    const field = reply[at + 2];
    const remaining = typeof field === 'string' ? Number(field) : typeof field === 'number' ? field : Number.NaN;
    if (!Number.isFinite(remaining)) {
      throw new Error(`${DECIDE_SCRIPT_NAME}: reply[${at + 2}] is not a number or number string: ${String(field)}`);
    }
    outcomes.push(outcomeOf(integer(reply, at) === 1, integer(reply, at + 1), remaining, integer(reply, at + 3), integer(reply, at + 4)));
  }
  return { outcomes, nowMs: integer(reply, 1 + 5 * count) };
}

function integer(reply: unknown[], index: number): number {
  const value = reply[index];
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new Error(`${DECIDE_SCRIPT_NAME}: reply[${index}] is not an integer: ${String(value)}`);
  }
  return value;
}
