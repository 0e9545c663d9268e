import type { LimitCall } from '@quota-service/core';
import type { SlotGroups } from './cross-slot/saga.js';
import { keySlot } from './key-slot.js';

/** The hash slot of a call's key, computed once per call (LimitCall.slot). */
export function slotOf(call: LimitCall): number {
  call.slot ??= keySlot(call.identityKey);
  return call.slot;
}

/** Whether the calls' keys share one hash slot. */
export function oneSlot(calls: readonly LimitCall[]): boolean {
  if (calls.length < 2) {
    if (calls.length === 1) slotOf(calls[0]!);
    return true;
  }
  const first = slotOf(calls[0]!);
  for (let i = 1; i < calls.length; i++) if (slotOf(calls[i]!) !== first) return false;
  return true;
}

/**
 * The calls split into groups that one script call can decide atomically,
 * one per hash slot, sorted by slot so every request reserves in the same
 * fixed order; within a slot in the calls' order. Each group lists indexes into `calls`.
 */
export function slotGroups(calls: readonly LimitCall[]): SlotGroups {
  const order = calls.map((_, i) => i).sort((a, b) => slotOf(calls[a]!) - slotOf(calls[b]!) || a - b);
  const groups: number[][] = [];
  let last = -1;
  for (const i of order) {
    const slot = calls[i]!.slot!;
    if (slot === last) groups[groups.length - 1]!.push(i);
    else {
      groups.push([i]);
      last = slot;
    }
  }
  return groups;
}
