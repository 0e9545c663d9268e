import type { GroupDecision, LimitOutcome } from '@quota-service/core';
import { type DecideStep, settlesEveryLimit, tellRecord } from '../../store.js';
import { type Emit, pick, place, type Saga, type ScriptStep, type SlotGroups } from './saga.js';

/**
 * A settlement across slots: the record's group settles and marks the
 * record in one call; then, unless the record says there is nothing to settle,
 * each other group is adjusted by the difference with a mark in its own slot,
 * set in the same call, that makes it apply once (every Settle, retries
 * included, sends them all).
 */
export class SettleSaga implements Saga {
  done = false;
  notBefore = 0;
  private readonly outcomes: LimitOutcome[];
  private record: GroupDecision | undefined;
  private error: Error | undefined;

  constructor(
    private readonly step: Extract<DecideStep, { mode: 'settle' }>,
    private readonly groups: SlotGroups,
  ) {
    this.outcomes = new Array<LimitOutcome>(step.calls.length);
  }

  next(emit: Emit): void {
    const { calls, records, actualCost } = this.step;
    const first = this.groups[0]!;
    if (this.record === undefined) {
      const memo = records.memoAt(first[0]!);
      if (memo === undefined) throw new Error('a settlement needs a request id');
      emit({ calls: pick(calls, first), mode: 'settle', options: { memo: { ...memo, count: calls.length }, actualCost, memoIndex: first[0]! } }, 0);
      return;
    }
    this.done = true;
    const settlement = this.record.settlement!;
    const delta = settlement.actualCost - settlement.estimate;
    for (let g = 1; g < this.groups.length; g++) {
      const group = this.groups[g]!;
      const index = group[0]!;
      if (delta === 0) {
        emit({ calls: pick(calls, group), mode: 'peek' }, g);
        continue;
      }
      const mark = records.markAt(index);
      if (mark === undefined) throw new Error('a settlement needs a request id');
      emit(
        {
          calls: pick(calls, group, Math.abs(delta)),
          mode: delta < 0 ? 'refund' : 'charge',
          options: { spentAtMs: settlement.spentAtMs[index]!, memo: { ...mark, count: group.length } },
        },
        g,
      );
    }
  }

  take(g: number, _step: ScriptStep, answer: GroupDecision | Error): void {
    if (answer instanceof Error) {
      this.error ??= answer;
      this.done = true;
      return;
    }
    if (g !== 0) {
      place(this.outcomes, this.groups[g]!, answer.outcomes);
      return;
    }
    const settlement = answer.settlement;
    if (settlement === undefined) {
      this.error = new Error('the store answered a settlement without one');
      this.done = true;
      return;
    }
    this.record = answer;
    // Nothing to adjust: no reservation, or the policy's limits changed since (the other groups cannot be matched to what they spent).
    if (!settlesEveryLimit(this.step, settlement)) this.done = true;
    else {
      place(this.outcomes, this.groups[0]!, answer.outcomes);
      tellRecord(this.step, answer, this.groups[0]![0]!);
    }
  }

  finish(): GroupDecision | Error {
    if (this.error !== undefined) return this.error;
    const record = this.record!;
    const settlement = record.settlement!;
    if (!settlesEveryLimit(this.step, settlement)) return record;
    return { outcomes: this.outcomes, nowMs: record.nowMs, settlement };
  }
}
