import { Counter, type Registry } from 'prom-client';
import type { SliceCounters } from '@quota-service/core';

/**
 * The service's own slices (docs/policies.md, "Slices"), read from its
 * holder's counters when scraped: slices taken, units granted from them
 * without a store call, units given back, and units that lapsed unused.
 */
export function registerSliceMetrics(registry: Registry, counters: () => SliceCounters): void {
  const registers = [registry];
  const counter = (name: string, help: string, read: (c: SliceCounters) => number) => {
    let reported = 0;
    new Counter({
      name,
      help,
      registers,
      collect() {
        const now = read(counters());
        if (now > reported) this.inc(now - reported);
        reported = now;
      },
    });
  };
  counter('quota_slices_taken_total', 'Slices this replica took of hot limits (a take that took at least one unit).', (c) => c.slicesTaken);
  counter(
    'quota_slice_units_granted_total',
    "Units this replica granted from its slices, without a store call (decision source 'slice').",
    (c) => c.unitsGrantedLocally,
  );
  counter('quota_slice_units_returned_total', 'Unused units of its slices this replica gave back to the shared state.', (c) => c.unitsReturned);
  counter(
    'quota_slice_units_lapsed_total',
    'Unused units of its slices that did not go back (the slice had lapsed, its window was over, or the call failed): lost for that time.',
    (c) => c.unitsLapsed,
  );
}
