import { createHash } from 'node:crypto';
import { algorithms, type Algorithm, type DecideMode, type DecideOptions, type LimitCall, type Memo, overrideKeyOf } from '@quota-service/core';
import { luaScripts } from '../../../gen/lua-scripts.js';

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
export const textLua = luaScripts['text.lua'];

/** An algorithm's Lua chunk (src/store/redis/script/<name>/<name>.lua), defining A.<name>, R.<name> (refund), C.<name> (charge) and a lease algorithm's L.<name>. */
export function algorithmLua(algorithm: Algorithm<unknown>): string {
  const folder = algorithm.name.replaceAll('_', '-');
  const path = `${folder}/${folder}.lua`;
  if (!Object.hasOwn(luaScripts, path)) throw new Error(`no Lua script ${path} for algorithm ${algorithm.name}`);
  return luaScripts[path as keyof typeof luaScripts];
}

/** The tables the algorithm files fill: decisions, refunds, charges and lease operations (decide.lua). */
export const ALGORITHM_TABLES = 'local A, R, C, L = {}, {}, {}, {}';

/** Everything before the entry: the definitions a Redis Function library makes once, at load. */
const decideDefinitions = [
  ALGORITHM_TABLES,
  textLua,
  // define(name) runs one algorithm's file, defining A.<name>, R.<name> and C.<name>, and
  // the driver calls it once per algorithm the call uses: defining all six
  // decisions and refunds on every call would cost Redis CPU on each decision.
  // Each file sits in its own branch, so its file-level locals stay out of
  // the others' way.
  'local function define(name)',
  ...Object.values(algorithms).map((algorithm, i) => `${i === 0 ? 'if' : 'elseif'} name == '${algorithm.name}' then\n${algorithmLua(algorithm)}`),
  'end',
  'end',
  luaScripts['override-guard.lua'],
  // The driver: its state and helpers, mode 'settle', the decision of one call, then the entry
  // (one call or a batch); decide.lua documents the protocol.
  luaScripts['driver-state.lua'],
  luaScripts['settle.lua'],
  luaScripts['decide.lua'],
].join('\n');

export const decideLua = `${decideDefinitions}\n${luaScripts['entry.lua']}`;

/**
 * The same script for node batches on a Redis Cluster master (decide.lua,
 * "Node batch"): the shebang line lets it reach keys of several slots served
 * by the node it runs on. Redis 7.0 or later; a single node never needs it,
 * so its script stays without the line.
 */
export const NODE_BATCH_SCRIPT_NAME = 'quotaDecideNode';
export const nodeBatchLua = `#!lua flags=allow-cross-slot-keys\n${decideLua}`;

/**
 * The same script as a Redis Function library (Redis 7.0 or later; FUNCTION
 * LOAD, then FCALL): its definitions (the driver, the algorithms once a call
 * first names them) are made once when the library loads, where EVALSHA makes
 * them anew on every call, which is a good part of a small call's time in
 * Redis. Each call starts clean (begin_call in driver-state.lua). Two
 * functions, one entry: `decide`, and `nodeBatch`, allowed to reach keys of
 * every slot of its node (as nodeBatchLua). The names carry a digest of the
 * code, so services of different versions sharing a Redis each call their own.
 */
export interface DecideLibrary {
  readonly name: string;
  readonly code: string;
  readonly decide: string;
  readonly nodeBatch: string;
}

function libraryOf(definitions: string, entry: string): DecideLibrary {
  const body = `${definitions}\nlocal function entry(KEYS, ARGV)\n${entry}\nend`;
  const name = `quota_${createHash('sha1').update(body).digest('hex').slice(0, 16)}`;
  const decide = `${name}_decide`;
  const nodeBatch = `${name}_decide_node`;
  const code = [
    `#!lua name=${name}`,
    body,
    `redis.register_function('${decide}', entry)`,
    `redis.register_function{function_name='${nodeBatch}', callback=entry, flags={'allow-cross-slot-keys'}}`,
  ].join('\n');
  return { name, code, decide, nodeBatch };
}

export const decideLibrary = libraryOf(decideDefinitions, luaScripts['entry.lua']);

/** KEYS and ARGV of the driver, without `numkeys` (ioredis adds it from the first element). */
export function decideArguments(calls: readonly LimitCall[], mode: DecideMode, nowMs?: number, options: DecideOptions = {}): ScriptCall {
  const { spentAtMs, memo } = options;
  if (mode === 'refund' && spentAtMs === undefined) throw new Error('refund needs the time of the spend');
  const settles = mode === 'settle';
  if (settles && (memo === undefined || options.actualCost === undefined)) throw new Error('settle needs the memo and the actual cost');
  const keys: string[] = [];
  const args = [
    mode,
    nowMs === undefined ? '' : String(nowMs),
    String(calls.length),
    // 'settle': the place (1-based) of the first call's limit among the request's limits.
    settles ? String((options.memoIndex ?? 0) + 1) : spentAtMs === undefined ? '' : String(spentAtMs),
    memo === undefined ? '' : String(memo.ttlMs),
    settles ? String(options.actualCost) : memo?.claim ? 'claim' : '',
    // Every call of a request carries a guard, or none does (src/engine/applied-limits.ts).
    calls[0]?.guard === undefined ? '' : String(calls[0].guard.generation),
  ];
  for (const call of calls) {
    const { limit, identityKey, cost, checkOnly } = call;
    const limitKeys = limit.algorithm.scriptKeys(identityKey, limit.params);
    const limitArgs = limit.algorithm.scriptArgs(limit.params, cost, call.lease);
    keys.push(...limitKeys);
    // A check-only call: its algorithm's name ends in '?' (decide.lua).
    args.push(checkOnly ? `${limit.algorithm.name}?` : limit.algorithm.name, String(limitKeys.length), String(limitArgs.length), ...limitArgs);
  }
  if (memo !== undefined) keys.push(memo.key);
  const first = calls[0]?.guard;
  if (first !== undefined) {
    // The generation of the first call's slot. A call across the slots of one
    // master reads that one only: a prefix override's change raises every
    // slot's before the admin call returns, so any slot's tells a stale view.
    keys.push(first.generationKey);
    for (const { guard, identityKey } of calls) {
      if (guard === undefined) throw new Error('every limit call of a guarded request needs a guard');
      keys.push(overrideKeyOf(identityKey));
      args.push(guard.stamp, String(guard.wildcardExpiresAtMs));
    }
  }
  const slot = calls[0]?.slot;
  if (slot === undefined) return { keys, args };
  for (const call of calls) if (call.slot !== slot) return { keys, args, slot, acrossSlots: true };
  return { keys, args, slot };
}

/** One driver call's KEYS and ARGV (decideArguments, rememberArguments). */
export interface ScriptCall {
  keys: string[];
  args: string[];
  /** On a Redis Cluster, the slot of its keys when known (LimitCall.slot); else computed from its first key. */
  slot?: number;
  /**
   * Its keys lie in several slots of one master (RedisStore's whole decision there):
   * it goes in a node batch even alone, and is never sent again alone.
   */
  acrossSlots?: true;
}

/** KEYS and ARGV that store `value` as the remembered decision ('' forgets it). */
export function rememberArguments(memo: Memo, value: string): ScriptCall {
  return { keys: [memo.key], args: ['remember', '', '0', '', String(memo.ttlMs), value, ''] };
}
