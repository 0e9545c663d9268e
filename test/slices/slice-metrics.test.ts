import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { SliceCounters } from '@quota-service/core';
import { registerSliceMetrics } from '../../src/metrics/slice-metrics.js';

describe('slice metrics', () => {
  it("reports the holder's counters as they grow, scrape after scrape", async () => {
    const registry = new Registry();
    const counters: SliceCounters = { slicesTaken: 2, unitsTaken: 100, unitsGrantedLocally: 70, unitsReturned: 25, unitsLapsed: 5 };
    registerSliceMetrics(registry, () => counters);
    const value = async (name: string) => (await registry.getSingleMetric(name)!.get()).values[0]?.value;
    expect(await value('quota_slices_taken_total')).toBe(2);
    expect(await value('quota_slice_units_granted_total')).toBe(70);
    expect(await value('quota_slice_units_returned_total')).toBe(25);
    expect(await value('quota_slice_units_lapsed_total')).toBe(5);
    counters.unitsGrantedLocally = 120;
    expect(await value('quota_slice_units_granted_total')).toBe(120);
    expect(await value('quota_slices_taken_total')).toBe(2);
  });
});
