import {
  asError,
  encodeRemembered,
  type GroupDecision,
  type LimitCall,
  type LimitOutcome,
  type Memo,
  replayedLeaseCalls,
  StoreUnavailableError,
  withLeasesNow,
} from '@quota-service/core';
import { SlotsApart } from '../store-errors.js';
import { allAllowed, type Emit, pick, place, type Saga, type ScriptStep, type ScriptSteps, type SlotGroups, WHOLE } from './saga.js';

/** A retry that finds its request still being decided looks again this often, this many times. */
const PENDING_POLL_MS = 5;
const PENDING_POLLS = 100;

/** A spend across slots: reserve group by group, refund on a rejection (decideAcrossSlots). */
export class SpendSaga implements Saga {
  done = false;
  notBefore = 0;
  private readonly outcomes: LimitOutcome[];
  /** The next group to spend while going; the group that rejected after a rejection. */
  private at = 0;
  private rejected = false;
  private error: Error | undefined;
  /** [group, spentAtMs] pairs of its reservations. */
  private readonly reserved: number[] = [];
  private decidedAt = 0;
  private polls = 0;
  private replay: GroupDecision | undefined;
  /** The claim of the request id was made: a failure forgets it, so a retry decides anew. */
  private claimed = false;

  constructor(
    private readonly calls: readonly LimitCall[],
    private readonly groups: SlotGroups,
    private readonly memo: Memo | undefined,
    private whole: boolean,
  ) {
    this.outcomes = new Array<LimitOutcome>(calls.length);
  }

  next(emit: Emit): void {
    if (this.error !== undefined || this.rejected) {
      // Undo the reservations; after a rejection the groups after it are asked for their own status (never spent).
      for (let i = 0; i < this.reserved.length; i += 2) {
        emit({ calls: pick(this.calls, this.groups[this.reserved[i]!]!), mode: 'refund', options: { spentAtMs: this.reserved[i + 1]! } }, this.reserved[i]!);
      }
      if (this.rejected) for (let g = this.at + 1; g < this.groups.length; g++) emit({ calls: pick(this.calls, this.groups[g]!), mode: 'check' }, g);
      this.done = true;
      return;
    }
    if (this.whole) emit({ calls: this.calls, mode: 'spend' }, WHOLE);
    else if (this.at === 0 && this.memo !== undefined) emit({ calls: pick(this.calls, this.groups[0]!), mode: 'spend', options: { memo: this.memo } }, 0);
    else emit({ calls: pick(this.calls, this.groups[this.at]!), mode: 'spend' }, this.at);
  }

  take(g: number, step: ScriptStep, answer: GroupDecision | Error): void {
    if (g === WHOLE) {
      // Slots apart after all: group by group from the next phase on. Else decided, all or nothing.
      if (answer instanceof SlotsApart) this.whole = false;
      else {
        if (answer instanceof Error) this.error = answer;
        else for (let i = 0; i < answer.outcomes.length; i++) this.outcomes[i] = answer.outcomes[i]!;
        this.done = true;
      }
      return;
    }
    if (step.mode !== 'spend') {
      // A refund or a check: a failed request's refund is best effort; after a rejection, an error fails the request.
      if (this.error === undefined && answer instanceof Error) this.error = answer;
      else if (!(answer instanceof Error)) place(this.outcomes, this.groups[g]!, answer.outcomes);
      return;
    }
    if (answer instanceof Error) {
      this.error = answer;
      this.claimed = this.claimed || (g > 0 && this.memo !== undefined);
      if (this.reserved.length === 0) this.done = true;
      return;
    }
    if (g === 0 && this.memo !== undefined) {
      if (answer.pending) {
        if (++this.polls >= PENDING_POLLS) {
          this.error = new StoreUnavailableError(new Error('an earlier call with this request_id is still being decided'));
          this.done = true;
        } else this.notBefore = performance.now() + PENDING_POLL_MS;
        return;
      }
      if (answer.replayed) {
        this.replay = answer;
        this.done = true;
        return;
      }
    }
    if (g === 0) this.decidedAt = answer.nowMs;
    place(this.outcomes, this.groups[g]!, answer.outcomes);
    if (allAllowed(answer.outcomes)) {
      this.reserved.push(g, answer.nowMs);
      this.at = g + 1;
      if (this.at === this.groups.length) this.done = true;
    } else {
      this.at = g;
      this.rejected = true;
    }
  }

  finish(scripts: ScriptSteps): GroupDecision | Error | Promise<GroupDecision | Error> {
    if (this.replay !== undefined) return leasesNow(scripts, this.calls, this.replay);
    if (this.error !== undefined) {
      const error = this.error;
      if (!this.claimed || this.memo === undefined) return error;
      return scripts.remember(this.memo, '').then(
        () => error,
        () => error,
      );
    }
    const decision: GroupDecision = { outcomes: this.outcomes, nowMs: this.decidedAt };
    if (this.memo === undefined) return decision;
    // The reservation a settlement needs: the cost and when each limit spent it (its group's time; a group that spent nothing, the first group's).
    const spentAtMs = this.calls.map(() => this.decidedAt);
    for (let i = 0; i < this.reserved.length; i += 2) for (const j of this.groups[this.reserved[i]!]!) spentAtMs[j] = this.reserved[i + 1]!;
    // Not fatal: the request was decided. A retry then finds 'pending' until the
    // claim expires and gets UNAVAILABLE (docs/policies.md, "Idempotent Allow").
    return scripts.remember(this.memo, encodeRemembered(decision, { estimate: this.calls[0]?.cost ?? 0, spentAtMs })).then(
      () => decision,
      () => decision,
    );
  }
}

/**
 * A replayed decision (a retry with the same request id) with its leases as
 * the store holds them now (one slot group's replay does this in its own
 * script call): an allowed one's lease calls are spent again, alone and all
 * or nothing (replayed-leases.ts). A lease still held is found held, one
 * released or expired is acquired again when there is room, and else the
 * concurrency limit denies the retry.
 */
function leasesNow(scripts: ScriptSteps, calls: readonly LimitCall[], replay: GroupDecision): GroupDecision | Promise<GroupDecision | Error> {
  const places = replayedLeaseCalls(calls, replay.outcomes);
  if (places === undefined) return replay;
  return scripts.spend(places.map((i) => calls[i]!)).then((now) => ({ ...replay, outcomes: withLeasesNow(replay.outcomes, places, now.outcomes) }), asError);
}
