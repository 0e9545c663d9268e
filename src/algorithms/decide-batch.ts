import type { ScriptCall } from './decide-script.js';

/**
 * The driver's batch mode (decide.lua, docs/decide-script.md, "Batch mode"):
 * many driver calls in one script call, and its reply back to the reply each
 * call would have had alone.
 */

/** One group of a batch: consecutive calls sharing their ARGV, so their number of limits too. */
interface BatchGroup {
  calls: number;
  limits: number;
}

/** A batch's KEYS and ARGV, and its groups, which its reply follows. */
export interface BatchCall extends ScriptCall {
  groups: BatchGroup[];
}

/**
 * KEYS and ARGV of one driver call in batch mode: each call decided in turn as
 * if it ran alone, one reply (or error) per call.
 * Consecutive calls with the same ARGV and key count form a group that sends
 * its ARGV once: a batch is mostly one policy at one cost, so Redis parses and
 * this process encodes about one argument per call (its key) instead of 16.
 */
export function batchArguments(calls: readonly ScriptCall[]): BatchCall {
  const keys: string[] = [];
  const args = ['batch', '0'];
  const groups: { at: number; nkeys: number; args: readonly string[]; calls: number }[] = [];
  let group: (typeof groups)[number] | undefined;
  for (const call of calls) {
    for (const key of call.keys) keys.push(key);
    if (group !== undefined && group.nkeys === call.keys.length && sameStrings(group.args, call.args)) {
      group.calls += 1;
      continue;
    }
    group = { at: args.length, nkeys: call.keys.length, args: call.args, calls: 1 };
    groups.push(group);
    args.push('', String(call.keys.length), String(call.args.length));
    for (const arg of call.args) args.push(arg);
  }
  args[1] = String(groups.length);
  for (const { at, calls: count } of groups) args[at] = String(count);
  // ARGV[3] of a driver call is its number of limits ('0' to remember a decision).
  return { keys, args, groups: groups.map((g) => ({ calls: g.calls, limits: Number(g.args[2]) })) };
}

function sameStrings(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * A batch's reply, flat (decide.lua): per group the `now` its calls decided
 * at, then per call of the group one of
 * - a decision: its reply without the last element, `now` (1 + 5 * limits elements, the first a number);
 * - the text 'remembered', or 'replay' and a replayed decision's fields, separated by one space;
 * - its error.
 * Back to each call's own reply, as the call alone would have answered it
 * (an Error in its place for an error), or an Error for the whole batch when
 * the reply is not that shape.
 */
export function splitBatchReply(reply: unknown, { groups }: BatchCall): unknown[] | Error {
  const replies: unknown[] = [];
  const count = groups.reduce((sum, g) => sum + g.calls, 0);
  const malformed = (why: string) => new Error(`batch: expected the replies of ${count} calls, ${why}, got ${JSON.stringify(reply)}`);
  if (!Array.isArray(reply)) return malformed('not an array');
  let at = 0;
  for (const [g, { calls, limits }] of groups.entries()) {
    const now: unknown = reply[at];
    if (typeof now !== 'number' || !Number.isInteger(now)) return malformed(`element ${at} (the now of group ${g + 1}) is not an integer`);
    at += 1;
    for (let c = 0; c < calls; c++) {
      const first: unknown = reply[at];
      if (typeof first === 'number') {
        const end = at + 1 + 5 * limits;
        if (end > reply.length) return malformed(`a decision of ${limits} limits at element ${at} is cut short`);
        const one: unknown[] = reply.slice(at, end);
        one.push(now);
        replies.push(one);
        at = end;
      } else if (first instanceof Error) {
        replies.push(first);
        at += 1;
      } else if (first === 'remembered' || first === 'replay' || (typeof first === 'string' && first.startsWith('replay '))) {
        replies.push(first.split(' '));
        at += 1;
      } else {
        return malformed(`element ${at} is neither a decision, a text nor an error`);
      }
    }
  }
  if (at !== reply.length) return malformed(`${reply.length - at} elements left over`);
  return replies;
}
