import type { LimitOutcome } from '../algorithms/algorithm.js';
import { encodeRemembered, parseRemembered, type DecideMode, type DecideOptions, type GroupDecision, type LimitCall, type Memo } from '../algorithms/decide-script.js';
import { MemorySpace } from '../algorithms/memory-space.js';
import { systemClock, type Clock } from '../clock.js';
import type { Limit } from '../config/policies.js';
import { asError } from '../engine/errors.js';
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
    return (await this.decideGroup(calls, mode)).outcomes;
  }

  decideGroups(list: readonly (readonly LimitCall[])[], mode: DecideMode): Promise<Array<GroupDecision | Error>> {
    const now = this.clock.now();
    const answers = new Array<GroupDecision | Error>(list.length);
    for (let i = 0; i < list.length; i++) {
      try {
        answers[i] = this.decideNow(list[i]!, mode, now, undefined);
      } catch (error) {
        answers[i] = asError(error);
      }
    }
    return Promise.resolve(answers);
  }

  async decideGroup(calls: readonly LimitCall[], mode: DecideMode, options: DecideOptions = {}): Promise<GroupDecision> {
    // Synchronous inside: nothing can interleave, which is what makes it atomic.
    // The same rules as the driver script (src/algorithms/decide.lua).
    const now = this.clock.now();
    const { spentAtMs, memo } = options;
    if (memo !== undefined && mode === 'spend') {
      const seen = this.space.get<string>(memo.key, now);
      if (seen !== undefined) return parseRemembered(seen, memo.count);
      const decision = this.decideNow(calls, mode, now, spentAtMs);
      this.space.set(memo.key, memo.claim ? 'pending' : encodeRemembered(decision), memo.ttlMs, now);
      return decision;
    }
    return this.decideNow(calls, mode, now, spentAtMs);
  }

  async remember(memo: Memo, value: string): Promise<void> {
    if (value === '') this.space.delete(memo.key);
    else this.space.set(memo.key, value, memo.ttlMs, this.clock.now());
  }

  private decideNow(calls: readonly LimitCall[], mode: DecideMode, now: number, spentAtMs: number | undefined): GroupDecision {
    const unchanged = ({ limit, identityKey }: LimitCall) => limit.algorithm.decideInMemory(this.space, identityKey, limit.params, 0, now).outcome;
    if (mode === 'refund') {
      if (spentAtMs === undefined) throw new Error('refund needs the time of the spend');
      for (const { limit, identityKey, cost } of calls) limit.algorithm.refundInMemory(this.space, identityKey, limit.params, cost, now, spentAtMs);
      return { outcomes: calls.map(unchanged), nowMs: now };
    }
    const decided = calls.map(({ limit, identityKey, cost }) => limit.algorithm.decideInMemory(this.space, identityKey, limit.params, cost, now));
    const all = decided.every((d) => d.outcome.allowed);
    const spends = mode === 'spend' && all;
    if (mode === 'spend' || mode === 'check') for (const d of decided) if (spends || !d.outcome.allowed) d.commit?.();
    const outcomes = decided.map((d, i) => (mode !== 'peek' && !spends && d.outcome.allowed ? unchanged(calls[i]!) : d.outcome));
    return { outcomes, nowMs: now };
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
