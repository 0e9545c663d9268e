import type { DecisionSource } from '@quota-service/core';

export type DecisionResult = 'allowed' | 'rejected';

/** Every source a decision can come from, and each one's place among them (a tally's cells). */
export const SOURCES: readonly DecisionSource[] = ['store', 'fail_open', 'fail_closed', 'local', 'slice'];
export const SOURCE_INDEX: Readonly<Record<DecisionSource, number>> = { store: 0, fail_open: 1, fail_closed: 2, local: 3, slice: 4 };

export interface DecisionLabels {
  policy: string;
  limit: string;
  result: DecisionResult;
  source: DecisionSource;
}

/**
 * Decisions counted in plain numbers between two scrapes, then handed to the
 * Prometheus counter in one inc per label set when it is scraped. prom-client
 * builds and checks a label key on every inc, too much to pay per decision.
 * A scrape drains the tally and empties it, so a label set is counted once
 * and a policy gone after a reload leaves nothing behind here.
 */
export class DecisionTally {
  /** policy -> limit -> counts by result (allowed, rejected) x source. */
  private readonly counts = new Map<string, Map<string, number[]>>();

  add(policy: string, limit: string, allowed: boolean, source: DecisionSource): void {
    cellsAt(this.counts, policy, limit, 2 * SOURCES.length)[(allowed ? 0 : SOURCES.length) + SOURCE_INDEX[source]]!++;
  }

  /** Every label set counted since the last drain, with its count; the tally is empty afterwards. */
  drain(each: (labels: DecisionLabels, count: number) => void): void {
    for (const [policy, byLimit] of this.counts) {
      for (const [limit, cells] of byLimit) {
        cells.forEach((count, i) => {
          if (count === 0) return;
          const result = i < SOURCES.length ? 'allowed' : 'rejected';
          each({ policy, limit, result, source: SOURCES[i % SOURCES.length]! }, count);
        });
      }
    }
    this.counts.clear();
  }
}

/** A tally's counts for one label pair (outer -> inner), `size` zeros when first asked for. */
export function cellsAt(counts: Map<string, Map<string, number[]>>, outer: string, inner: string, size: number): number[] {
  let byInner = counts.get(outer);
  if (byInner === undefined) {
    byInner = new Map();
    counts.set(outer, byInner);
  }
  let cells = byInner.get(inner);
  if (cells === undefined) {
    cells = new Array<number>(size).fill(0);
    byInner.set(inner, cells);
  }
  return cells;
}
