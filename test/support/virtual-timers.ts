import type { LeaseTimers } from '@quota-service/client';

/**
 * Lease timers on virtual time: nothing fires until advance() moves the clock
 * past a timer's due time, so renewal timing is tested without sleeps.
 */
export class VirtualTimers implements LeaseTimers {
  private nowMs: number;
  private nextId = 1;
  private readonly timers = new Map<number, { at: number; callback: () => void }>();

  constructor(startMs: number) {
    this.nowMs = startMs;
  }

  now(): number {
    return this.nowMs;
  }

  setTimeout(callback: () => void, ms: number): number {
    const id = this.nextId++;
    this.timers.set(id, { at: this.nowMs + ms, callback });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** Due times of the timers not yet fired, in order. */
  pending(): number[] {
    return [...this.timers.values()].map((t) => t.at).sort((x, y) => x - y);
  }

  /** Moves the clock forward by `ms`, firing each timer that falls due, in due order. */
  advance(ms: number): void {
    const end = this.nowMs + ms;
    for (;;) {
      let next: [number, { at: number; callback: () => void }] | undefined;
      for (const entry of this.timers) if (entry[1].at <= end && (next === undefined || entry[1].at < next[1].at)) next = entry;
      if (next === undefined) break;
      this.timers.delete(next[0]);
      this.nowMs = Math.max(this.nowMs, next[1].at);
      next[1].callback();
    }
    this.nowMs = end;
  }
}
