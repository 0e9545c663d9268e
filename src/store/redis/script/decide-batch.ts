import { ReplyError } from 'ioredis';
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
 *
 * `node`: a node batch for one master of a Redis Cluster (decide.lua, "Node
 * batch"), whose calls' keys span several slots: the keys go first in ARGV and
 * KEYS stays empty, since Redis refuses declared keys of several slots.
 */
export function batchArguments(calls: readonly ScriptCall[], node = false): BatchCall {
  if (calls.length === 1 && !node) return oneCallBatch(calls[0]!);
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
  const shapes = groups.map((g) => ({ calls: g.calls, limits: Number(g.args[2]) }));
  if (!node) return { keys, args, groups: shapes };
  // 'node-batch', the key count and the keys, then the groups from their count on.
  const nodeArgs = new Array<string>(2 + keys.length + args.length - 1);
  nodeArgs[0] = 'node-batch';
  nodeArgs[1] = String(keys.length);
  for (let i = 0; i < keys.length; i++) nodeArgs[2 + i] = keys[i]!;
  for (let i = 1; i < args.length; i++) nodeArgs[1 + keys.length + i] = args[i]!;
  return { keys: [], args: nodeArgs, groups: shapes };
}

/** A batch of one call: its keys as they are, its ARGV after the one group's header. */
function oneCallBatch({ keys, args }: ScriptCall): BatchCall {
  const batchArgs = new Array<string>(5 + args.length);
  batchArgs[0] = 'batch';
  batchArgs[1] = '1';
  batchArgs[2] = '1';
  batchArgs[3] = String(keys.length);
  batchArgs[4] = String(args.length);
  for (let i = 0; i < args.length; i++) batchArgs[5 + i] = args[i]!;
  return { keys, args: batchArgs, groups: [{ calls: 1, limits: Number(args[2]) }] };
}

function sameStrings(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Record kinds of a batch reply (decide.lua): 0 and 1 are decisions, the byte their all_allowed. */
const KIND_TEXT = 2;
const KIND_ERROR = 3;
const KIND_ELSEWHERE = 4;

/**
 * A call of a node batch that did not run: the node does not serve its keys
 * now (its slot moved or is migrating, or the cluster is down). `reason` is
 * Redis's error text. Safe to send again, where the keys are.
 */
export class NotRunHere {
  constructor(readonly reason: string) {}
}

/** A limit of a decision record: allowed (a byte), then four doubles. */
const LIMIT_BYTES = 1 + 4 * 8;

/**
 * A batch's reply (decide.lua, docs/decide-script.md "Batch mode"): one
 * binary string, little-endian, holding per group the `now` its calls
 * decided at (a double), then per call of the group one record:
 * - kind 0 or 1, a decision: that byte is all_allowed, then per limit
 *   allowed (a byte) and retry_after_ms, remaining, reset_after_ms, delay_ms (doubles);
 * - kind 2, a 4-byte length and a text: 'remembered', 'replay' and a
 *   replayed decision's fields, or 'settle' and a settlement's (mode
 *   'settle'), separated by one space;
 * - kind 3, a 4-byte length and the text of its error;
 * - kind 4 (a node batch), a 4-byte length and why the node did not run it.
 * Back to each call's own reply, as the call alone would have answered it
 * (a ReplyError in its place for an error, a NotRunHere for a call not
 * run), except that `remaining` is the exact number instead of its "%.17g"
 * text; or an Error for the whole batch when the reply is not that shape.
 */
export function splitBatchReply(reply: unknown, batch: BatchCall): unknown[] | Error {
  const replies: unknown[] = [];
  if (!Buffer.isBuffer(reply)) return malformedReply(reply, batch, 'not a binary string');
  const groups = batch.groups;
  let at = 0;
  for (let g = 0; g < groups.length; g++) {
    const { calls, limits } = groups[g]!;
    if (at + 8 > reply.length) return malformedReply(reply, batch, `the now of group ${g + 1} at byte ${at} is cut short`);
    // Redis makes a Lua number in a reply an integer by truncating it; so does this.
    const now = Math.trunc(reply.readDoubleLE(at));
    at += 8;
    for (let c = 0; c < calls; c++) {
      const kind = reply[at];
      if (kind === 0 || kind === 1) {
        const end = at + 1 + LIMIT_BYTES * limits;
        if (end > reply.length) return malformedReply(reply, batch, `a decision of ${limits} limits at byte ${at} is cut short`);
        const one: unknown[] = [kind];
        for (let l = at + 1; l < end; l += LIMIT_BYTES) {
          one.push(
            reply[l],
            Math.trunc(reply.readDoubleLE(l + 1)),
            reply.readDoubleLE(l + 9),
            Math.trunc(reply.readDoubleLE(l + 17)),
            Math.trunc(reply.readDoubleLE(l + 25)),
          );
        }
        one.push(now);
        replies.push(one);
        at = end;
      } else if (kind === KIND_TEXT || kind === KIND_ERROR || kind === KIND_ELSEWHERE) {
        if (at + 5 > reply.length) return malformedReply(reply, batch, `the length of a text at byte ${at} is cut short`);
        const end = at + 5 + reply.readUInt32LE(at + 1);
        if (end > reply.length) return malformedReply(reply, batch, `a text of ${end - at - 5} bytes at byte ${at} is cut short`);
        const text = reply.toString('utf8', at + 5, end);
        if (kind === KIND_ERROR) replies.push(new ReplyError(asRedisError(text)));
        else if (kind === KIND_ELSEWHERE) replies.push(new NotRunHere(text));
        else if (text === 'remembered' || text === 'replay' || text.startsWith('replay ') || text.startsWith('settle ')) replies.push(text.split(' '));
        else return malformedReply(reply, batch, `the text at byte ${at} is neither 'remembered', a replay nor a settlement`);
        at = end;
      } else {
        return malformedReply(reply, batch, `byte ${at} is no record kind (${kind ?? 'the reply ends'})`);
      }
    }
  }
  if (at !== reply.length) return malformedReply(reply, batch, `${reply.length - at} bytes left over`);
  return replies;
}

/** The whole batch's error when its reply is not the shape its groups call for: what was expected, where it went wrong, and the reply. */
function malformedReply(reply: unknown, { groups }: BatchCall, why: string): Error {
  const count = groups.reduce((sum, g) => sum + g.calls, 0);
  return new Error(`batch: expected the replies of ${count} calls, ${why}, got ${describe(reply)}`);
}

/** An error's text as Redis sends an error reply: no line breaks (trimmed at the ends, spaces inside). */
function asRedisError(text: string): string {
  return text.replace(/^[\r\n]+|[\r\n]+$/g, '').replace(/[\r\n]/g, ' ');
}

/** A reply for an error message: a binary string in hex, shortened. */
function describe(reply: unknown): string {
  if (!Buffer.isBuffer(reply)) return JSON.stringify(reply) ?? String(reply);
  const hex = reply.subarray(0, 64).toString('hex');
  return `${reply.length} bytes${reply.length > 0 ? ` (${hex}${reply.length > 64 ? '...' : ''})` : ''}`;
}
