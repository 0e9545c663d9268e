import type { DecideOptions, GroupDecision, LimitOutcome } from '@quota-service/core';
import type { ScriptedStep } from '../../store.js';
import { type Emit, pick, place, type Saga, type ScriptStep, type SlotGroups } from './saga.js';

/** Every other mode: each group on its own, in one phase; the first error fails the step. */
export class EachGroup implements Saga {
  done = false;
  notBefore = 0;
  private readonly outcomes: LimitOutcome[];
  private error: Error | undefined;
  private nowMs = 0;

  constructor(
    private readonly step: ScriptedStep,
    private readonly groups: SlotGroups,
  ) {
    this.outcomes = new Array<LimitOutcome>(step.calls.length);
  }

  next(emit: Emit): void {
    const { step } = this;
    const options: DecideOptions | undefined = step.mode === 'refund' ? { spentAtMs: step.spentAtMs } : undefined;
    for (let g = 0; g < this.groups.length; g++) emit({ calls: pick(step.calls, this.groups[g]!), mode: step.mode, options }, g);
    this.done = true;
  }

  take(g: number, _step: ScriptStep, answer: GroupDecision | Error): void {
    if (answer instanceof Error) this.error ??= answer;
    else {
      if (g === 0) this.nowMs = answer.nowMs;
      place(this.outcomes, this.groups[g]!, answer.outcomes);
    }
  }

  finish(): GroupDecision | Error {
    return this.error ?? { outcomes: this.outcomes, nowMs: this.nowMs };
  }
}
