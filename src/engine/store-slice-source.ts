import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { SliceSource } from '@quota-service/core';
import { decideOne, type QuotaStore } from '../store/store.js';

/** A holder's slice steps on the store, under the holder's name (the service's own slices). */
export function storeSliceSource(store: QuotaStore, holder: string): SliceSource {
  return {
    slice: (call, op, giveBack) =>
      decideOne(store, { mode: 'slice', calls: [call], holder, op, giveBack }).then((decision) => {
        if (decision.slice === undefined) throw new Error('the store answered a slice step without its slice');
        return decision.slice;
      }),
  };
}

/** This replica's name as a holder: its own slice records, never another replica's (a restart is a new holder). */
export function serviceHolderName(): string {
  return `service:${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
}
