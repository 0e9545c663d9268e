import { type FixedWindowParams, windowMs } from '../algorithms/fixed-window/model.js';
import type { MemorySpace } from '../algorithms/memory-space.js';
import { encodeIdentityValue } from '../keys.js';
import type { LimitCall } from '../types.js';

/**
 * Taking a slice of a limit and giving back what was not used, on the
 * embedded store: the same steps, in the same order of floating-point
 * operations, as the Lua script (src/store/redis/script/slices/slice.lua);
 * property tests hold the two equal.
 *
 * A take asks the limit's own algorithm what is available now (a peek), and
 * spends `floor(min(share * available, max_units))` units at once, as one
 * ordinary spend: a slice is counted in the shared state before any of it is
 * granted. A give-back is the algorithm's refund of the unused units at the
 * time the slice was taken: capped at what the limit can hold, and never into
 * a later window (a fixed window gives back only while the window the slice
 * was taken in is still current).
 *
 * Each holder's slice has a record (units, when taken) under its own key, so
 * a holder gives back at most what it took, once, and a crashed holder's
 * slice simply lapses: its units stay spent.
 */

/** What a take or a give-back did, and the limit's remaining after it. */
export interface SliceAnswer {
  /** Units taken into the new slice; 0 when none (too little available, or a give-back alone). */
  taken: number;
  /** How long the new slice may be used, from the store's now (ms); 0 without one. */
  validMs: number;
  /** The limit's remaining after the call, as a peek reports it. */
  remaining: number;
  /** Units handed back to the limit from the holder's previous slice (at most what it held). */
  returned: number;
  /** The store's now (unix ms) the call ran at. */
  nowMs: number;
}

/** The holder's slice record, kept beside the limit's state (same hash tag). */
export interface SliceRecord {
  units: number;
  /** Unix ms (store clock) the slice was taken at: a refund gives back into that time's window. */
  at: number;
}

/** A take, or a give-back alone; each gives back `giveBack` units of the holder's previous slice first. */
export type SliceOp = 'take' | 'give-back';

/** The key of one holder's slice of one limit and identity: `<state key>:_slice:<holder>`, in the identity's hash slot. */
export function sliceKeyOf(stateKey: string, holder: string): string {
  return `${stateKey}:_slice:${encodeIdentityValue(holder)}`;
}

/** How long a slice record is kept: twice the slice's life, so a give-back at its end still finds it. */
export function sliceRecordTtlMs(validMs: number): number {
  return 2 * validMs;
}

/**
 * The slice step on the embedded store. `call` is the limit and identity
 * (its cost is ignored); the limit must have its `slices` option.
 */
export function sliceInMemory(space: MemorySpace, call: LimitCall, holder: string, op: SliceOp, giveBack: number, nowMs: number): SliceAnswer {
  const { limit, identityKey } = call;
  const options = limit.slices;
  if (options === undefined) throw new Error(`limit "${limit.name}" has no slices`);
  const algorithm = limit.algorithm;
  const recordKey = sliceKeyOf(identityKey, holder);

  let returned = 0;
  const record = space.get<SliceRecord>(recordKey, nowMs);
  if (record !== undefined) {
    returned = Math.min(record.units, Math.max(0, giveBack));
    // A window counts whole units, and only its own: once the window the
    // slice was taken in is over, nothing goes back (the refund agrees).
    if (algorithm.name === 'fixed_window') {
      const ms = windowMs((limit.params as FixedWindowParams).window);
      returned = record.at - (record.at % ms) === nowMs - (nowMs % ms) ? Math.floor(returned) : 0;
    }
    if (returned > 0) algorithm.refundInMemory(space, identityKey, limit.params, returned, nowMs, record.at);
    space.delete(recordKey);
  }

  let taken = 0;
  let validMs = 0;
  let remaining = algorithm.decideInMemory(space, identityKey, limit.params, 0, nowMs).outcome.remaining;
  if (op === 'take') {
    const units = Math.floor(Math.min(options.share * remaining, options.maxUnits));
    if (units >= 1) {
      const decided = algorithm.decideInMemory(space, identityKey, limit.params, units, nowMs);
      if (decided.outcome.allowed) {
        decided.commit?.();
        taken = units;
        validMs = algorithm.name === 'fixed_window' ? Math.min(options.ttlMs, decided.outcome.resetAfterMs) : options.ttlMs;
        space.set(recordKey, { units: taken, at: nowMs } satisfies SliceRecord, sliceRecordTtlMs(validMs), nowMs);
        remaining = decided.outcome.remaining;
      }
    }
  }
  return { taken, validMs, remaining, returned, nowMs };
}
