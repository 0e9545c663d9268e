/** The percentiles a bench summary shows. */
export interface LatencySummary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

/**
 * Every latency of a run, kept exactly (8 bytes each: a million calls is 8 MB)
 * and sorted once at the end, so the percentiles are the samples' own values
 * rather than a histogram's bucket edges.
 */
export class LatencyRecorder {
  private samples = new Float64Array(1024);
  private size = 0;

  get count(): number {
    return this.size;
  }

  add(ms: number): void {
    if (this.size === this.samples.length) {
      const grown = new Float64Array(this.samples.length * 2);
      grown.set(this.samples);
      this.samples = grown;
    }
    this.samples[this.size++] = ms;
  }

  /** Nearest-rank percentiles: p is the smallest sample with at least p% of samples at or below it. */
  summary(): LatencySummary {
    const sorted = this.samples.slice(0, this.size).sort();
    const at = (p: number) => (this.size === 0 ? 0 : sorted[Math.max(0, Math.ceil((p / 100) * this.size) - 1)]!);
    let total = 0;
    for (const ms of sorted) total += ms;
    return {
      count: this.size,
      mean: this.size === 0 ? 0 : total / this.size,
      p50: at(50),
      p90: at(90),
      p99: at(99),
      p999: at(99.9),
      max: this.size === 0 ? 0 : sorted[this.size - 1]!,
    };
  }
}
