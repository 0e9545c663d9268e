import type { LimitOutcome } from '../algorithms/algorithm.js';
import type { DecideMode, LimitCall } from '../algorithms/decide-script.js';
import { MemorySpace } from '../algorithms/memory-space.js';
import { systemClock, type Clock } from '../clock.js';
import type { Limit } from '../config/policies.js';
import type { QuotaStore } from './store.js';

/** How often expired keys are dropped when nobody reads them. */
const SWEEP_INTERVAL_MS = 10_000;

/**
 * The embedded store: per-process state, the TypeScript models of the same
 * algorithms the Lua scripts run. Used when no Redis is configured, so the
 * service works on a bare machine; state is lost on restart and not shared
 * between replicas.
 */
export class MemoryStore implements QuotaStore {
  readonly description = 'embedded in-memory store';
  readonly space = new MemorySpace();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly clock: Clock = systemClock) {
    this.sweeper = setInterval(() => this.space.sweep(this.clock.now()), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  async decide(limit: Limit, identityKey: string, cost: number): Promise<LimitOutcome> {
    const [outcome] = await this.decideAll([{ limit, identityKey, cost }], 'spend');
    return outcome as LimitOutcome;
  }

  async decideAll(calls: readonly LimitCall[], mode: DecideMode): Promise<LimitOutcome[]> {
    // Synchronous inside: nothing can interleave, which is what makes it atomic.
    const now = this.clock.now();
    const decided = calls.map(({ limit, identityKey, cost }) => limit.algorithm.decideInMemory(this.space, identityKey, limit.params, cost, now));
    const all = decided.every((d) => d.outcome.allowed);
    // The same rule as the driver script (src/algorithms/decide.lua).
    if (mode === 'spend') for (const d of decided) if (all || !d.outcome.allowed) d.commit?.();
    return decided.map((d) => d.outcome);
  }

  /** Live keys; for the state-keys metric. */
  async keyCount(): Promise<number> {
    return this.space.keys(this.clock.now()).length;
  }

  async ready(): Promise<void> {}

  async close(): Promise<void> {
    clearInterval(this.sweeper);
  }
}
