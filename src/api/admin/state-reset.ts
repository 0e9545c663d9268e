import { keySlot } from '../../store/redis/key-slot.js';
import { Cluster, type Redis } from 'ioredis';
import type { MemorySpace } from '@quota-service/core';

/** Removes state keys: an identity's next decision under those limits starts from a full quota. */
export interface StateReset {
  reset(keys: readonly string[]): Promise<void>;
}

/** The embedded store's state: removed at once, between two decisions (both run synchronously). */
export class MemoryStateReset implements StateReset {
  constructor(private readonly space: MemorySpace) {}

  async reset(keys: readonly string[]): Promise<void> {
    for (const key of keys) this.space.delete(key);
  }
}

/**
 * State in Redis: one DEL per hash slot (all keys of one identity share one),
 * so each identity's keys go in one atomic step between two decisions.
 */
export class RedisStateReset implements StateReset {
  constructor(private readonly redis: Redis | Cluster) {}

  async reset(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    if (!(this.redis instanceof Cluster)) {
      await this.redis.del(...keys);
      return;
    }
    const bySlot = new Map<number, string[]>();
    for (const key of keys) {
      const slot = keySlot(key);
      bySlot.set(slot, [...(bySlot.get(slot) ?? []), key]);
    }
    await Promise.all([...bySlot.values()].map((group) => (this.redis as Cluster).del(...group)));
  }
}
