/**
 * The clock and timers a lease renews itself by. The default is the process's
 * own; tests inject virtual ones so renewal timing runs without sleeps.
 */
export interface LeaseTimers {
  /** Milliseconds, monotonic enough for intervals (Date.now by default). */
  now(): number;
  /** Calls `callback` after `ms`; the handle goes to clearTimeout. */
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemLeaseTimers: LeaseTimers = {
  now: () => Date.now(),
  setTimeout(callback, ms) {
    // A held lease does not keep the process alive by itself: the work does.
    return setTimeout(callback, ms).unref();
  },
  clearTimeout(handle) {
    clearTimeout(handle as NodeJS.Timeout);
  },
};
