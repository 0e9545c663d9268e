import { randomUUID } from 'node:crypto';
import type { Clock } from '@quota-service/core';
import {
  compareOverrides,
  isLive,
  newRecord,
  type OverrideRecord,
  type OverrideRequest,
  type OverrideStore,
  type OverrideTarget,
  type OverrideView,
} from './override.js';

/**
 * Overrides of the embedded store: in this process's memory, on the store's
 * clock, lost on restart like its state. Reads and writes are synchronous, so
 * a decision always sees the overrides as they are: no guard, no refresh.
 */
export class MemoryOverrides implements OverrideStore, OverrideView {
  /** By `${limit}\0${value}`. */
  private readonly exacts = new Map<string, OverrideRecord>();
  /** By limit, longest prefix first. */
  private readonly prefixes = new Map<string, OverrideRecord[]>();

  constructor(private readonly clock: Clock) {}

  exact(limit: string, value: string): OverrideRecord | undefined {
    if (this.exacts.size === 0) return undefined;
    const record = this.exacts.get(`${limit}\0${value}`);
    return record !== undefined && isLive(record, this.clock.now()) ? record : undefined;
  }

  prefix(limit: string, algorithm: string, value: string): OverrideRecord | undefined {
    const list = this.prefixes.get(limit);
    if (list === undefined) return undefined;
    const now = this.clock.now();
    for (const record of list) if (record.algorithm === algorithm && value.startsWith(record.value) && isLive(record, now)) return record;
    return undefined;
  }

  async set(request: OverrideRequest): Promise<{ current: OverrideRecord; previous: OverrideRecord | undefined }> {
    const now = this.clock.now();
    const previous = this.live(request.target, now);
    const current = newRecord(request, now, randomUUID());
    if (current.match === 'exact') this.exacts.set(exactKey(current), current);
    else {
      const list = (this.prefixes.get(current.limit) ?? []).filter((r) => r.value !== current.value);
      list.push(current);
      list.sort((a, b) => b.value.length - a.value.length);
      this.prefixes.set(current.limit, list);
    }
    return { current, previous };
  }

  async get(target: OverrideTarget): Promise<OverrideRecord | undefined> {
    return this.live(target, this.clock.now());
  }

  async list(limit?: string): Promise<OverrideRecord[]> {
    const now = this.clock.now();
    const all = [...this.exacts.values(), ...[...this.prefixes.values()].flat()];
    return all.filter((r) => (limit === undefined || r.limit === limit) && isLive(r, now)).sort(compareOverrides);
  }

  async delete(target: OverrideTarget): Promise<OverrideRecord | undefined> {
    const previous = this.live(target, this.clock.now());
    if (target.match === 'exact') this.exacts.delete(exactKey(target));
    else {
      const list = this.prefixes.get(target.limit)?.filter((r) => r.value !== target.value);
      if (list === undefined || list.length === 0) this.prefixes.delete(target.limit);
      else this.prefixes.set(target.limit, list);
    }
    return previous;
  }

  private live(target: OverrideTarget, now: number): OverrideRecord | undefined {
    const record = target.match === 'exact' ? this.exacts.get(exactKey(target)) : this.prefixes.get(target.limit)?.find((r) => r.value === target.value);
    return record !== undefined && isLive(record, now) ? record : undefined;
  }
}

const exactKey = (target: OverrideTarget) => `${target.limit}\0${target.value}`;
