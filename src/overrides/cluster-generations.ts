// A prefix override change on a Redis Cluster: every slot's copy of the
// override generation raised before the admin call returns (docs/keys.md), so
// every decision, whichever of its master's slots it checks, sees the change.
import { setTimeout as delay } from 'node:timers/promises';
import type { Cluster, Redis } from 'ioredis';
import { overrideGenerationKey, StoreUnavailableError } from '@quota-service/core';
import { type OverrideScripts, raiseGenerationsOn } from './redis-override-scripts.js';
import { SLOTS, slotTags } from './slot-tags.js';

/** Generation keys per script call on one master (CONTRIBUTING: keep scripts short). */
const RAISE_BATCH_KEYS = 256;

/** Slots raised at once, one script call each, when their node's batch failed. */
const RAISE_CONCURRENCY = 1024;

/** Rounds of raising the slots still behind one by one, after the node batches, each after a fresh slot map and a short pause. */
const RAISE_ROUNDS = 3;
const RAISE_PAUSE_MS = 200;

/**
 * A prefix override change is stored, but some cluster slots still hold the
 * previous generation after every retry: until a change reaches them, a
 * replica that has not read the registry since may go on applying the
 * previous prefix overrides to identities there. The admin call fails
 * (UNAVAILABLE) with this message; repeating it raises every slot again.
 */
export class GenerationNotRaisedError extends StoreUnavailableError {
  override name = 'GenerationNotRaisedError';
  constructor(behind: number, cause: unknown) {
    super(cause);
    this.message =
      `the prefix override change is stored, but ${behind} of ${SLOTS} cluster slots could not be told of it, so replicas may go on ` +
      'applying the previous prefix overrides to identities in those slots: repeat the call once the cluster is healthy ' +
      '(a repeated DeleteOverride answers NOT_FOUND, the override being gone already, and still brings every slot up to date)';
  }
}

/**
 * On a cluster, every slot's copy of the generation, before the admin call
 * returns: one script call per RAISE_BATCH_KEYS slots of a master, on its
 * own connection; the slots of a call that failed (its node left, a slot
 * moved) then one by one, by the cluster's routing, for up to RAISE_ROUNDS
 * rounds. Raising is idempotent and never lowers a slot, so a repeat (or a
 * later change) repairs whatever is left behind.
 */
export async function raiseEverySlot(cluster: Cluster, scripts: OverrideScripts, generation: number): Promise<void> {
  const failed = { error: undefined as unknown };
  let behind = await raiseByNode(cluster, generation, failed);
  for (let round = 1; behind.length > 0 && round <= RAISE_ROUNDS; round++) {
    await delay(RAISE_PAUSE_MS * round);
    await new Promise<void>((resolve) => cluster.refreshSlotsCache(() => resolve()));
    behind = await raiseOneByOne(scripts, behind, generation, failed);
  }
  if (behind.length > 0) throw new GenerationNotRaisedError(behind.length, failed.error);
}

/** Node batches: answers the slots of the calls that failed. */
async function raiseByNode(cluster: Cluster, generation: number, failed: { error: unknown }): Promise<number[]> {
  const tags = slotTags();
  const masters = new Map<string, Redis>();
  for (const node of cluster.nodes('master')) masters.set(`${node.options.host}:${node.options.port}`, node);
  const bySlotOwner = new Map<string, number[]>();
  const behind: number[] = [];
  for (let slot = 0; slot < SLOTS; slot++) {
    const owner = cluster.slots[slot]?.[0];
    if (owner === undefined || !masters.has(owner)) behind.push(slot);
    else {
      const slots = bySlotOwner.get(owner);
      if (slots === undefined) bySlotOwner.set(owner, [slot]);
      else slots.push(slot);
    }
  }
  const calls: Promise<void>[] = [];
  for (const [owner, slots] of bySlotOwner) {
    const node = masters.get(owner)!;
    for (let from = 0; from < slots.length; from += RAISE_BATCH_KEYS) {
      const chunk = slots.slice(from, from + RAISE_BATCH_KEYS);
      const keys = chunk.map((slot) => overrideGenerationKey(tags[slot]!));
      calls.push(
        raiseGenerationsOn(node, keys, generation).then(
          () => undefined,
          (error: unknown) => {
            failed.error = error;
            behind.push(...chunk);
          },
        ),
      );
    }
  }
  await Promise.all(calls);
  return behind;
}

/** One script call per slot, routed by the cluster client (it follows MOVED and ASK): answers the slots that failed. */
async function raiseOneByOne(scripts: OverrideScripts, slots: readonly number[], generation: number, failed: { error: unknown }): Promise<number[]> {
  const tags = slotTags();
  const behind: number[] = [];
  for (let from = 0; from < slots.length; from += RAISE_CONCURRENCY) {
    const batch = slots.slice(from, from + RAISE_CONCURRENCY);
    await Promise.all(
      batch.map((slot) =>
        scripts.raiseGeneration(overrideGenerationKey(tags[slot]!), generation).then(
          () => undefined,
          (error: unknown) => {
            failed.error = error;
            behind.push(slot);
          },
        ),
      ),
    );
  }
  return behind;
}
