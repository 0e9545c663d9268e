import { performance } from 'node:perf_hooks';
import type { Call } from '../load.js';

/** Latencies in buckets 5% wide: percentiles over millions of calls in a few KB. */
class LatencyBuckets {
  private readonly counts = new Float64Array(512);
  private total = 0;

  add(ms: number): void {
    const index = Math.min(this.counts.length - 1, Math.max(0, Math.ceil(Math.log(Math.max(ms, 0.001) * 1_000) / Math.log(1.05))));
    this.counts[index]! += 1;
    this.total++;
  }

  /** The upper bound (ms) of the bucket holding the p-th percentile. */
  percentile(p: number): number {
    let seen = 0;
    for (let i = 0; i < this.counts.length; i++) {
      seen += this.counts[i]!;
      if (seen >= (p / 100) * this.total && seen > 0) return 1.05 ** i / 1_000;
    }
    return Number.NaN;
  }
}

/**
 * Load at a fixed rate for as long as it runs: `concurrency` workers each take a
 * send slot from a pacer, which hands out `rate` slots a second. A worker whose
 * call is slow holds no slot, so a slow service lowers the rate reached (reported
 * as `calls` over the elapsed time) instead of piling up a queue; slots the
 * workers could not use are dropped, not sent later in a burst. Its counters are
 * live: the soak's sampler reads them while it runs. (bench/load.ts is the closed
 * loop, for the maximum.)
 */
export class PacedLoad {
  /** Calls sent: answered, failed or in flight. */
  sent = 0;
  calls = 0;
  allowed = 0;
  errors = 0;
  readonly errorMessages = new Map<string, number>();
  private readonly latency = new LatencyBuckets();
  private readonly waiting: (() => void)[] = [];
  private slots = 0;
  private running = true;
  private readonly ticker: NodeJS.Timeout;
  private readonly workers: Promise<void>[];
  private readonly started = performance.now();
  private stoppedAt: number | undefined;

  constructor(
    private readonly call: Call,
    rate: number,
    concurrency: number,
  ) {
    let last = performance.now();
    // At most 50 ms of slots banked: a stall of the driver never turns into a burst.
    const cap = Math.max(1, rate * 0.05);
    this.ticker = setInterval(() => {
      const now = performance.now();
      this.slots = Math.min(cap, this.slots + ((now - last) / 1_000) * rate);
      last = now;
      while (this.slots >= 1 && this.waiting.length > 0) {
        this.slots--;
        this.waiting.shift()!();
      }
    }, 5);
    this.workers = Array.from({ length: concurrency }, () => this.worker());
  }

  /** Decisions answered per second so far. */
  get rate(): number {
    return this.calls / (((this.stoppedAt ?? performance.now()) - this.started) / 1_000);
  }

  percentileMs(p: number): number {
    return this.latency.percentile(p);
  }

  /** Stops sending; resolves once every call in flight has answered. */
  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.ticker);
    for (const release of this.waiting.splice(0)) release();
    await Promise.all(this.workers);
    this.stoppedAt = performance.now();
  }

  private async worker(): Promise<void> {
    const signal = new AbortController().signal;
    while (this.running) {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
      if (!this.running) return;
      const sent = performance.now();
      this.sent++;
      try {
        if (await this.call(signal)) this.allowed++;
        this.calls++;
        this.latency.add(performance.now() - sent);
      } catch (error) {
        this.errors++;
        const message = error instanceof Error ? error.message : String(error);
        if (this.errorMessages.size < 20 || this.errorMessages.has(message)) this.errorMessages.set(message, (this.errorMessages.get(message) ?? 0) + 1);
      }
    }
  }
}
