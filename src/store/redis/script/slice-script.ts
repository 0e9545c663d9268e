import { algorithms, type LimitCall, type SliceAnswer, type SliceOp, SLICE_ALGORITHMS, sliceKeyOf } from '@quota-service/core';
import { luaScripts } from '../../../gen/lua-scripts.js';
import { ALGORITHM_TABLES, algorithmLua, textLua } from './decide-script.js';

/**
 * The slice script (slices/slice.lua): taking a slice of a limit and giving
 * back its unused part. A script of its own rather than a mode of the decide
 * driver: a holder calls it at most about once per slice's life, never in a
 * batch of decisions, with a reply of its own shape; kept apart, it adds
 * nothing to the driver every decision runs (its size, its parsing) nor to
 * the batch format. It runs the same algorithm files as the driver, so a
 * slice is spent and given back by exactly the code that decides.
 */
export const SLICE_SCRIPT_NAME = 'quotaSlice';

export const sliceLua = [
  ALGORITHM_TABLES,
  textLua,
  // Each algorithm's file in a block of its own, as the driver's define() keeps their locals apart.
  ...SLICE_ALGORITHMS.map((name) => `do\n${algorithmLua(algorithms[name])}\nend`),
  luaScripts['slices/slice.lua'],
].join('\n');

/** KEYS and ARGV of the slice script for one limit call of a holder. */
export function sliceArguments(call: LimitCall, holder: string, op: SliceOp, giveBack: number, nowMs?: number): { keys: string[]; args: string[] } {
  const { limit, identityKey } = call;
  const options = limit.slices;
  if (options === undefined) throw new Error(`limit "${limit.name}" has no slices`);
  const keys = [...limit.algorithm.scriptKeys(identityKey, limit.params), sliceKeyOf(identityKey, holder)];
  const args = [
    op,
    nowMs === undefined ? '' : String(nowMs),
    limit.algorithm.name,
    String(options.share),
    String(options.maxUnits),
    String(options.ttlMs),
    String(giveBack),
    ...limit.algorithm.scriptArgs(limit.params, 0),
  ];
  return { keys, args };
}

/** The script's reply { taken, valid_ms, remaining (text), returned, now } as a SliceAnswer. */
export function parseSliceReply(reply: unknown): SliceAnswer {
  if (!Array.isArray(reply) || reply.length !== 5) throw new Error(`unexpected slice reply: ${JSON.stringify(reply)}`);
  const [taken, validMs, remaining, returned, nowMs] = reply.map(Number) as [number, number, number, number, number];
  if (![taken, validMs, remaining, returned, nowMs].every(Number.isFinite)) throw new Error(`unexpected slice reply: ${JSON.stringify(reply)}`);
  return { taken, validMs, remaining, returned, nowMs };
}
