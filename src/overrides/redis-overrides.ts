import { randomUUID } from 'node:crypto';
import { Cluster, type Redis } from 'ioredis';
import {
  type Clock,
  type Limit,
  OVERRIDE_GENERATION_KEY,
  OVERRIDE_INDEX_KEY,
  OVERRIDE_WILDCARDS_KEY,
  type OverrideGuard,
  overrideGenerationKey,
  overrideKey,
  overrideKeyOf,
} from '@quota-service/core';
import {
  compareOverrides,
  isLive,
  newRecord,
  type OverrideRecord,
  type OverrideRequest,
  type OverrideStore,
  type OverrideTarget,
  type OverrideView,
  staleGeneration,
} from './override.js';
import { raiseEverySlot } from './cluster-generations.js';
import { type OverrideScripts, overrideScripts } from './redis-override-scripts.js';
import { keySlot } from '../store/redis/key-slot.js';
import { slotTags } from './slot-tags.js';

/** An expired exact override's key stays this long past its expiry (the decision script ignores it by then). */
const EXPIRED_KEPT_MS = 24 * 3600 * 1000;

export interface RedisOverridesOptions {
  /** The store's time for the records, as RedisStore's clock gives it to the scripts; default Redis's own (TIME). */
  clock?: Clock;
}

/**
 * Overrides in Redis, shared by every replica and kept across restarts.
 *
 * - An exact override lives beside the identity's state (same hash tag, so
 *   the same slot): the decision script reads it in the decision's own
 *   atomic step.
 * - Prefix overrides live in one registry hash with a generation, which is
 *   also kept under a key in every slot (on one node: one key). Each replica
 *   keeps the registry in memory and sends the generation it applies with
 *   every decision; the script checks it against its slot's.
 *
 * When a replica's view is not current (an exact override it does not know,
 * a newer generation, an expired override), the script fails the call before
 * writing anything (override-guard.lua); the engine reads the overrides again
 * (refresh) and decides anew. So a change applies to every decision any
 * replica makes after the admin call that made it returned.
 */
export class RedisOverrides implements OverrideStore, OverrideView {
  private generation = 0;
  /** Prefix overrides by limit, longest prefix first. */
  private prefixes = new Map<string, OverrideRecord[]>();
  /** Exact overrides this replica has read, by `${limit}\0${value}`. */
  private readonly exacts = new Map<string, OverrideRecord>();
  private readonly cluster: boolean;
  private readonly scripts: OverrideScripts;
  /** Guards of calls no override applies to, per slot (0 on one node), for the current generation. */
  private plainGuards: { generation: number; bySlot: OverrideGuard[] } = { generation: -1, bySlot: [] };

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly options: RedisOverridesOptions = {},
  ) {
    this.cluster = redis instanceof Cluster;
    // The slot tags now, not on the first decision: computing them takes a moment.
    if (this.cluster) slotTags();
    this.scripts = overrideScripts(redis);
  }

  exact(limit: string, value: string): OverrideRecord | undefined {
    return this.exacts.size === 0 ? undefined : this.exacts.get(`${limit}\0${value}`);
  }

  prefix(limit: string, algorithm: string, value: string): OverrideRecord | undefined {
    const list = this.prefixes.get(limit);
    if (list === undefined) return undefined;
    for (const record of list) if (record.algorithm === algorithm && value.startsWith(record.value)) return record;
    return undefined;
  }

  guard(identityKey: string, exact: OverrideRecord | undefined, prefixApplied: OverrideRecord | undefined, knownSlot?: number): OverrideGuard {
    const slot = this.cluster ? (knownSlot ?? keySlot(identityKey)) : 0;
    if (exact === undefined && prefixApplied === undefined) {
      // The usual call: no override applies. One shared guard per slot and generation, not one per call.
      if (this.plainGuards.generation !== this.generation) this.plainGuards = { generation: this.generation, bySlot: [] };
      let guard = this.plainGuards.bySlot[slot];
      if (guard === undefined) {
        guard = Object.freeze({ generation: this.generation, generationKey: this.generationKeyOf(slot), stamp: '', wildcardExpiresAtMs: 0 });
        this.plainGuards.bySlot[slot] = guard;
      }
      return guard;
    }
    return {
      generation: this.generation,
      generationKey: this.generationKeyOf(slot),
      stamp: exact?.stamp ?? '',
      wildcardExpiresAtMs: prefixApplied?.expiresAtMs ?? 0,
    };
  }

  private generationKeyOf(slot: number): string {
    return this.cluster ? overrideGenerationKey(slotTags()[slot]!) : OVERRIDE_GENERATION_KEY;
  }

  /** Reads the registry and the calls' exact overrides again, with the store's time to drop expired ones. */
  async refresh(calls: readonly { identityKey: string; limit: Limit }[], identityValues: readonly string[], error: Error): Promise<void> {
    const [now, registry, ...exacts] = await Promise.all([
      this.now(),
      this.redis.hgetall(OVERRIDE_WILDCARDS_KEY),
      ...calls.map((call) => this.redis.hget(overrideKeyOf(call.identityKey), 'rec')),
    ]);
    this.takeRegistry(registry, now, staleGeneration(error));
    for (let i = 0; i < calls.length; i++) {
      const key = `${calls[i]!.limit.name}\0${identityValues[i]}`;
      const record = parse(exacts[i] as string | null);
      if (record === undefined || !isLive(record, now)) this.exacts.delete(key);
      else this.exacts.set(key, record);
    }
  }

  /**
   * The registry as read: taken unless an older read than the one already
   * taken. `stored` is the generation the decision script saw; a registry
   * behind it was lost (a shard's data) and is taken as it is now.
   */
  private takeRegistry(registry: Record<string, string>, now: number, stored: number): void {
    const generation = Number(registry.gen ?? 0);
    if (generation < this.generation && stored <= this.generation) return;
    const prefixes = new Map<string, OverrideRecord[]>();
    for (const [field, text] of Object.entries(registry)) {
      if (field === 'gen') continue;
      const record = parse(text);
      if (record === undefined || !isLive(record, now)) continue;
      const list = prefixes.get(record.limit) ?? [];
      list.push(record);
      prefixes.set(record.limit, list);
    }
    for (const list of prefixes.values()) list.sort((a, b) => b.value.length - a.value.length);
    this.prefixes = prefixes;
    this.generation = Math.max(generation, stored);
  }

  async set(request: OverrideRequest): Promise<{ current: OverrideRecord; previous: OverrideRecord | undefined }> {
    const now = await this.now();
    const current = newRecord(request, now, randomUUID());
    const json = JSON.stringify(current);
    let previousText: string | null;
    if (current.match === 'exact') {
      // The index first: a listing then never misses an override in force (it checks each entry's key).
      await this.redis.hset(OVERRIDE_INDEX_KEY, indexField(current), json);
      const ttl = current.expiresAtMs === 0 ? undefined : current.expiresAtMs - now + EXPIRED_KEPT_MS;
      previousText = await this.scripts.setExact(overrideKey(current.limit, request.keyBy, current.value), current.stamp, current.expiresAtMs, json, ttl);
      this.exacts.set(`${current.limit}\0${current.value}`, current);
    } else {
      previousText = await this.writePrefix(current, json, now);
    }
    const previous = parse(previousText);
    return { current, previous: previous !== undefined && isLive(previous, now) ? previous : undefined };
  }

  async get(target: OverrideTarget, keyBy: string): Promise<OverrideRecord | undefined> {
    const [now, text] = await Promise.all([
      this.now(),
      target.match === 'exact'
        ? this.redis.hget(overrideKey(target.limit, keyBy, target.value), 'rec')
        : this.redis.hget(OVERRIDE_WILDCARDS_KEY, indexField(target)),
    ]);
    const record = parse(text);
    return record !== undefined && isLive(record, now) ? record : undefined;
  }

  async list(limit?: string): Promise<OverrideRecord[]> {
    const [now, registry, index] = await Promise.all([this.now(), this.redis.hgetall(OVERRIDE_WILDCARDS_KEY), this.redis.hgetall(OVERRIDE_INDEX_KEY)]);
    const found: OverrideRecord[] = [];
    for (const [field, text] of Object.entries(registry)) {
      const record = field === 'gen' ? undefined : parse(text);
      if (record !== undefined && isLive(record, now)) found.push(record);
    }
    // The index says where to look; each override's own key says what is in force.
    const entries = Object.entries(index).map(([field, text]) => ({ field, indexed: parse(text) }));
    const truths = await Promise.all(
      entries.map(({ indexed }) => (indexed === undefined ? null : this.redis.hget(overrideKey(indexed.limit, indexed.keyBy, indexed.value), 'rec'))),
    );
    const dead: string[] = [];
    for (let i = 0; i < entries.length; i++) {
      const record = parse(truths[i] ?? null);
      if (record !== undefined && isLive(record, now)) found.push(record);
      else dead.push(entries[i]!.field);
    }
    if (dead.length > 0) await this.redis.hdel(OVERRIDE_INDEX_KEY, ...dead);
    return found.filter((r) => limit === undefined || limit === '' || r.limit === limit).sort(compareOverrides);
  }

  async delete(target: OverrideTarget, keyBy: string): Promise<OverrideRecord | undefined> {
    const now = await this.now();
    let previousText: string | null;
    if (target.match === 'exact') {
      // The key first: the index may name a removed override (a listing skips it), never hide one in force.
      previousText = await this.scripts.deleteExact(overrideKey(target.limit, keyBy, target.value));
      await this.redis.hdel(OVERRIDE_INDEX_KEY, indexField(target));
      this.exacts.delete(`${target.limit}\0${target.value}`);
    } else {
      previousText = await this.writePrefix(target, '', now);
    }
    const previous = parse(previousText);
    return previous !== undefined && isLive(previous, now) ? previous : undefined;
  }

  /** Writes or removes ('') a prefix override, then raises the generation every decision checks. */
  private async writePrefix(target: OverrideTarget, json: string, now: number): Promise<string | null> {
    const [previous, generation] = await this.scripts.writePrefix(
      OVERRIDE_WILDCARDS_KEY,
      this.cluster ? undefined : OVERRIDE_GENERATION_KEY,
      indexField(target),
      json,
      now,
    );
    if (this.cluster) await raiseEverySlot(this.redis as Cluster, this.scripts, Number(generation));
    return previous === '' ? null : previous;
  }

  /** The store's time: Redis TIME (tests: the test clock the scripts get). */
  private async now(): Promise<number> {
    if (this.options.clock !== undefined) return this.options.clock.now();
    const [seconds, micros] = await this.redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }
}

/** A record's field in the registry and the index: `<limit>|<value>` (a limit name has no `|`). */
const indexField = (target: OverrideTarget): string => `${target.limit}|${target.value}`;

function parse(text: string | null | undefined): OverrideRecord | undefined {
  if (text === null || text === undefined || text === '') return undefined;
  try {
    return JSON.parse(text) as OverrideRecord;
  } catch {
    return undefined;
  }
}
