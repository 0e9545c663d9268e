import { asError, decideInMemory, MemorySpace, sliceInMemory, systemClock, type Clock, type GroupDecision, type Memo } from '@quota-service/core';
import { type DecideStep, type QuotaStore, tellRecord } from './store.js';

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

  /** Each step in order, synchronously: nothing can interleave, so each is atomic. */
  decide(steps: readonly DecideStep[]): Promise<Array<GroupDecision | Error>> {
    const now = this.clock.now();
    const answers = new Array<GroupDecision | Error>(steps.length);
    for (let i = 0; i < steps.length; i++) {
      try {
        answers[i] = this.decideStep(steps[i]!, now);
      } catch (error) {
        answers[i] = asError(error);
      }
    }
    return Promise.resolve(answers);
  }

  /** One step, by the same rules as the Redis driver script (decideInMemory); the record of a request id at the first limit. */
  private decideStep(step: DecideStep, now: number): GroupDecision {
    const { calls } = step;
    switch (step.mode) {
      case 'spend': {
        const placed = step.records?.memoAt(0);
        const memo = placed === undefined ? step.memo : { key: placed.key, ttlMs: placed.ttlMs, count: calls.length };
        return decideInMemory(this.space, calls, 'spend', now, memo === undefined ? undefined : { memo });
      }
      case 'refund':
        return decideInMemory(this.space, calls, 'refund', now, { spentAtMs: step.spentAtMs, memo: step.memo });
      case 'settle': {
        const memo = step.records.memoAt(0);
        if (memo === undefined) throw new Error('a settlement needs a request id');
        const decision = decideInMemory(this.space, calls, 'settle', now, {
          memo: { ...memo, count: calls.length },
          actualCost: step.actualCost,
          memoIndex: 0,
        });
        tellRecord(step, decision, 0);
        return decision;
      }
      case 'slice': {
        const slice = sliceInMemory(this.space, step.calls[0], step.holder, step.op, step.giveBack, now);
        return { outcomes: [], nowMs: now, slice };
      }
      default:
        return decideInMemory(this.space, calls, step.mode, now);
    }
  }

  async remember(memo: Memo, value: string): Promise<void> {
    if (value === '') this.space.delete(memo.key);
    else this.space.set(memo.key, value, memo.ttlMs, this.clock.now());
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
