import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LatencyRecorder } from '../../../clients/quotactl/src/latency-stats.js';

/** The reference: nearest rank on a plainly sorted copy. */
function nearestRank(samples: readonly number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.ceil((p / 100) * sorted.length) - 1]!;
}

describe("bench's latency percentiles", () => {
  it('equal nearest-rank percentiles of the samples, however many (past the first growth) and in whatever order', () => {
    const latency = fc.double({ min: 0, max: 10_000, noNaN: true });
    fc.assert(
      fc.property(fc.array(latency, { minLength: 1, maxLength: 3_000 }), (samples) => {
        const recorder = new LatencyRecorder();
        for (const ms of samples) recorder.add(ms);
        const summary = recorder.summary();
        expect(summary.count).toBe(samples.length);
        expect(summary.p50).toBe(nearestRank(samples, 50));
        expect(summary.p90).toBe(nearestRank(samples, 90));
        expect(summary.p99).toBe(nearestRank(samples, 99));
        expect(summary.p999).toBe(nearestRank(samples, 99.9));
        expect(summary.max).toBe(Math.max(...samples));
        expect(summary.mean).toBeCloseTo(samples.reduce((a, b) => a + b, 0) / samples.length, 6);
      }),
      { numRuns: 200 },
    );
  });

  it('no samples: zeros, not NaN', () => {
    expect(new LatencyRecorder().summary()).toEqual({ count: 0, mean: 0, p50: 0, p90: 0, p99: 0, p999: 0, max: 0 });
  });
});
