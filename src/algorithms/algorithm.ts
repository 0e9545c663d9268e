import { readFileSync } from 'node:fs';
import type { MemorySpace } from './memory-space.js';

/** The outcome of one limit for one request. */
export interface LimitOutcome {
  allowed: boolean;
  /** Milliseconds until a retry of the same cost could pass; 0 when allowed. */
  retryAfterMs: number;
  /** Units still available after this decision (may be fractional for a token bucket). */
  remaining: number;
  /** Milliseconds until the limit is fully replenished. */
  resetAfterMs: number;
}

/**
 * One algorithm, two bodies: the Lua script Redis runs and the TypeScript
 * model the embedded store runs. Both take the same inputs and give the same
 * outcome; property tests hold them to that.
 */
export interface Algorithm<P> {
  readonly name: string;
  /** Command name under which the script is registered (ioredis defineCommand). */
  readonly scriptName: string;
  /** The Lua source; KEYS and ARGV are documented in its header. */
  readonly lua: string;
  /** KEYS for the script, from the identity's key (src/engine/keys.ts). */
  scriptKeys(identityKey: string, params: P): string[];
  /** ARGV for the script, without the trailing `now` that only tests send. */
  scriptArgs(params: P, cost: number): string[];
  /** Parses the script's reply; throws if it is not the documented shape. */
  parseReply(reply: unknown, params: P): LimitOutcome;
  /** The same decision on the embedded store. */
  decideInMemory(space: MemorySpace, identityKey: string, params: P, cost: number, nowMs: number): LimitOutcome;
  /** The most units the limit grants at once (AllowResponse LimitStatus.limit). */
  capacity(params: P): number;
  /** Why this limit can never grant `cost` (it is bad input), or undefined when it can. */
  rejectCost(params: P, cost: number): string | undefined;
  /**
   * The same limit with its numbers scaled by `share` (0 < share <= 1): what
   * one instance grants on its own under the `local` failure mode.
   */
  scaleParams(params: P, share: number): P;
}

/** Reads a Lua script that sits beside the module that uses it (the build copies .lua files). */
export function readLua(moduleUrl: string, fileName: string): string {
  return readFileSync(new URL(fileName, moduleUrl), 'utf8');
}

/** Scripts reply with integers and strings only; this reads one integer of a reply. */
export function replyInteger(reply: unknown[], index: number, script: string): number {
  const value = reply[index];
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new Error(`${script}: reply[${index}] is not an integer: ${String(value)}`);
  }
  return value;
}

export function replyArray(reply: unknown, length: number, script: string): unknown[] {
  if (!Array.isArray(reply) || reply.length !== length) {
    throw new Error(`${script}: expected a reply of ${length} elements, got ${JSON.stringify(reply)}`);
  }
  return reply;
}
