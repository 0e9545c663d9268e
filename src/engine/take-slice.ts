import { FailedPreconditionError, InvalidArgumentError, quoteCapped, type SliceAnswer, type SliceOp } from '@quota-service/core';
import { decideOne, type QuotaStore } from '../store/store.js';
import type { Prepared } from './prepared.js';

/** What a holder asks of the service (QuotaService.TakeSlice). */
export interface TakeSliceInput {
  policy: string;
  identity: Readonly<Record<string, string>>;
  limit: string;
  holder: string;
  giveBack: number;
  giveBackOnly: boolean;
}

/** A holder's name: it names a key (percent-encoded), so its length is bounded. */
export const MAX_HOLDER_CHARS = 200;

/**
 * A holder's slice step for one limit of a prepared request (the limit as it
 * applies to the identity: an identity under a runtime override has no
 * slices, nor does a limit without them: FAILED_PRECONDITION naming `limit`).
 */
export function takeSlice(store: QuotaStore, prepared: Prepared, input: TakeSliceInput): Promise<SliceAnswer> {
  if (input.holder.length === 0 || input.holder.length > MAX_HOLDER_CHARS)
    throw new InvalidArgumentError('holder', `must be 1 to ${MAX_HOLDER_CHARS} characters`);
  if (!Number.isFinite(input.giveBack) || input.giveBack < 0)
    throw new InvalidArgumentError('give_back', `must be a finite number, at least 0, got ${input.giveBack}`);
  const call = prepared.calls.find((c) => c.limit.name === input.limit);
  if (call === undefined) throw new InvalidArgumentError('limit', `policy "${input.policy}" has no limit ${quoteCapped(input.limit)}`);
  if (call.limit.slices === undefined) {
    throw new FailedPreconditionError(`limit: limit "${call.limit.name}" of policy "${input.policy}" has no slices for this identity`);
  }
  const op: SliceOp = input.giveBackOnly ? 'give-back' : 'take';
  return decideOne(store, {
    mode: 'slice',
    calls: [{ limit: call.limit, identityKey: call.identityKey, cost: 0 }],
    holder: input.holder,
    op,
    giveBack: input.giveBack,
  }).then((decision) => {
    if (decision.slice === undefined) throw new Error('the store answered a slice step without its slice');
    return decision.slice;
  });
}
