/**
 * Bounded work in progress (a concurrency limit, unlike a rate limit,
 * bounds work in flight). No queue: when full, the caller answers 503 at once
 * instead of letting a backlog grow.
 */
export class ConcurrencyLimit {
  private inFlight = 0;

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`max in flight must be an integer >= 1, got ${max}`);
  }

  tryAcquire(): boolean {
    if (this.inFlight >= this.max) return false;
    this.inFlight++;
    return true;
  }

  release(): void {
    this.inFlight--;
  }
}
