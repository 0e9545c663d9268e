import { keySlot } from '../store/redis/key-slot.js';

/** Redis Cluster's hash slots. */
export const SLOTS = 16384;

let tags: string[] | undefined;

/**
 * For each cluster slot, a short hash tag that hashes to it: a key that
 * carries `{<tag>}` lives in that slot. The override generation is kept once
 * per slot under such keys, so every decision can read it in its own slot.
 * Computed once, on first use (about 200 000 CRC16s of short strings).
 */
export function slotTags(): readonly string[] {
  if (tags !== undefined) return tags;
  const found = new Array<string>(SLOTS);
  let missing = SLOTS;
  for (let i = 0; missing > 0; i++) {
    const tag = i.toString(36);
    const slot = keySlot(tag);
    if (found[slot] === undefined) {
      found[slot] = tag;
      missing--;
    }
  }
  tags = found;
  return found;
}
