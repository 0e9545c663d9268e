import {
  asError,
  decideInMemory,
  MemorySpace,
  systemClock,
  type Clock,
  type DecideMode,
  type DecideOptions,
  type GroupDecision,
  type Limit,
  type LimitCall,
  type LimitOutcome,
  type Memo,
} from '@quota-service/core';
import type { DecideStep, QuotaStore } from './store.js';

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

  /** Answers in this process, as soon as the event loop gets to it: never silent, however busy. */
  silentForMs(): number {
    return 0;
  }

  async decide(limit: Limit, identityKey: string, cost: number): Promise<LimitOutcome> {
    const [outcome] = await this.decideAll([{ limit, identityKey, cost }], 'spend');
    return outcome as LimitOutcome;
  }

  async decideAll(calls: readonly LimitCall[], mode: DecideMode): Promise<LimitOutcome[]> {
    return (await this.decideGroup(calls, mode)).outcomes;
  }

  decideGroups(list: readonly (readonly LimitCall[])[], mode: DecideMode | readonly DecideStep[]): Promise<Array<GroupDecision | Error>> {
    const now = this.clock.now();
    const answers = new Array<GroupDecision | Error>(list.length);
    for (let i = 0; i < list.length; i++) {
      try {
        const step = typeof mode === 'string' ? undefined : mode[i]!;
        answers[i] =
          step === undefined ? decideInMemory(this.space, list[i]!, mode as DecideMode, now) : decideInMemory(this.space, list[i]!, step.mode, now, step);
      } catch (error) {
        answers[i] = asError(error);
      }
    }
    return Promise.resolve(answers);
  }

  async decideGroup(calls: readonly LimitCall[], mode: DecideMode, options: DecideOptions = {}): Promise<GroupDecision> {
    return decideInMemory(this.space, calls, mode, this.clock.now(), options);
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
