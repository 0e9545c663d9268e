import type { LimitCall, LimitOutcome } from './types.js';

/**
 * A retried Allow (same request_id) answered from its remembered decision:
 * the places of its lease calls when that decision was allowed, else
 * undefined (a denial holds no lease, and is answered again as it was). The
 * remembered lease may since have been released or have expired, so these
 * calls are spent again, alone: a lease still held is found held (its time
 * left, nothing written), one no longer held is acquired again when the set
 * has room. The policy's other limits are not spent again.
 */
export function replayedLeaseCalls(calls: readonly LimitCall[], remembered: readonly LimitOutcome[]): number[] | undefined {
  let places: number[] | undefined;
  for (let i = 0; i < calls.length; i++) {
    if (remembered[i]?.allowed !== true) return undefined;
    const call = calls[i]!;
    if (call.lease === undefined || call.checkOnly === true) continue;
    places ??= [];
    places.push(i);
  }
  return places;
}

/** The remembered outcomes with those at `places` replaced by the lease calls' answers now (`now[j]` for `places[j]`). */
export function withLeasesNow(remembered: readonly LimitOutcome[], places: readonly number[], now: readonly LimitOutcome[]): LimitOutcome[] {
  const outcomes = remembered.slice();
  for (let j = 0; j < places.length; j++) outcomes[places[j]!] = now[j]!;
  return outcomes;
}
