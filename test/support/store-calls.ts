import type { DecideMode, DecideOptions, GroupDecision, Limit, LimitCall, LimitOutcome } from '@quota-service/core';
import { type DecideStep, decideOne, type QuotaStore } from '../../src/store/store.js';

/**
 * The store's one verb (QuotaStore.decide) in the shapes tests speak: one
 * limit, one step's outcomes, one step's decision, several steps. A step's
 * options as the script takes them: a memo names the record outright.
 */
export function stepOf(calls: readonly LimitCall[], mode: DecideMode, options: DecideOptions = {}): DecideStep {
  switch (mode) {
    case 'spend':
      return options.memo === undefined ? { mode, calls } : { mode, calls, memo: options.memo };
    case 'refund':
      if (options.spentAtMs === undefined) throw new Error('refund needs the time of the spend');
      return options.memo === undefined ? { mode, calls, spentAtMs: options.spentAtMs } : { mode, calls, spentAtMs: options.spentAtMs, memo: options.memo };
    case 'settle': {
      const { memo, actualCost } = options;
      if (memo === undefined || actualCost === undefined) throw new Error('settle needs the memo and the actual cost');
      return { mode, calls, actualCost, records: { memoAt: () => memo, markAt: () => undefined } };
    }
    default:
      return { mode, calls };
  }
}

/** One limit decided and spent (mode 'spend'). */
export async function decideLimit(store: QuotaStore, limit: Limit, identityKey: string, cost: number): Promise<LimitOutcome> {
  const [outcome] = await decideAll(store, [{ limit, identityKey, cost }], 'spend');
  return outcome!;
}

/** One step's outcomes. */
export async function decideAll(store: QuotaStore, calls: readonly LimitCall[], mode: DecideMode): Promise<LimitOutcome[]> {
  return (await decideOne(store, stepOf(calls, mode))).outcomes;
}

/** One step's decision. */
export function decideGroup(store: QuotaStore, calls: readonly LimitCall[], mode: DecideMode, options?: DecideOptions): Promise<GroupDecision> {
  return decideOne(store, stepOf(calls, mode, options));
}

/** Several steps in one decide, each in `mode` or its own. */
export function decideGroups(
  store: QuotaStore,
  list: readonly (readonly LimitCall[])[],
  mode: DecideMode | readonly ({ mode: DecideMode } & DecideOptions)[],
): Promise<Array<GroupDecision | Error>> {
  return store.decide(list.map((calls, i) => (typeof mode === 'string' ? stepOf(calls, mode) : stepOf(calls, mode[i]!.mode, mode[i]))));
}
