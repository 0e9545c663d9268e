import {
  asError,
  type DecideMode,
  type DecideOptions,
  encodeRemembered,
  type GroupDecision,
  type LimitCall,
  type LimitOutcome,
  type Memo,
  replayedLeaseCalls,
  StoreUnavailableError,
  withLeasesNow,
} from '@quota-service/core';
import { type DecideStep, settlesEveryLimit, tellRecord } from '../store.js';
import { SlotsApart } from './store-errors.js';

/** One script call: calls whose keys share a slot (or one master's slots), a mode and its options. */
export interface ScriptStep {
  readonly calls: readonly LimitCall[];
  readonly mode: DecideMode;
  readonly options?: DecideOptions;
  /** A settlement decided in this one call: its step, whose record is told as soon as it answers. */
  readonly settle?: Extract<DecideStep, { mode: 'settle' }>;
}

/** How the saga reaches Redis. */
export interface ScriptSteps {
  /** Script steps sent together (one batch per master), answered in their order. */
  run(steps: readonly ScriptStep[]): Promise<Array<GroupDecision | Error>>;
  remember(memo: Memo, value: string): Promise<void>;
  /** Whether one script call there can decide `calls`, whose keys lie in several slots (one master serves them all, as last seen). */
  inOneCall(calls: readonly LimitCall[]): boolean;
  /** A spend decided again (a replay's leases), whatever slots its calls lie in. */
  spend(calls: readonly LimitCall[]): Promise<GroupDecision>;
}

/** Indexes into a step's calls, one list per hash slot, sorted by slot; never mutated once made. */
export type SlotGroups = readonly (readonly number[])[];

/** A retry that finds its request still being decided looks again this often, this many times. */
const PENDING_POLL_MS = 5;
const PENDING_POLLS = 100;

/** In place of a group: the step's whole decision in one call on one master. */
const WHOLE = -1;

/** Adds a script step to the coming phase; `tag` comes back with its answer. */
type Emit = (step: ScriptStep, tag: number) => void;

/** One step of the store's decide whose calls lie in several slots, as a sequence of single-slot script steps. */
interface Saga {
  /** No more script steps; `finish` answers. */
  done: boolean;
  /** Not before this time (ms, this process's clock): waiting for another call to store its decision. */
  notBefore: number;
  /** Adds its script steps for the coming phase. */
  next(emit: Emit): void;
  /** The answer to a step it emitted with `tag`. */
  take(tag: number, step: ScriptStep, answer: GroupDecision | Error): void;
  finish(scripts: ScriptSteps): GroupDecision | Error | Promise<GroupDecision | Error>;
}

/**
 * The cross-slot saga. Redis Cluster decides one script call atomically only
 * when its keys share a slot (or, in a node batch, one master's slots), so a
 * step whose keys lie in several slots is decided as a sequence of
 * single-slot script steps, in phases: each phase is one `run` of every
 * saga's next steps, which the store sends as one batched script call per
 * master. So a batch of user + tenant decisions costs two batched round trips,
 * not two script calls per request.
 *
 * A spend reserves slot group by slot group, in slot order (every request
 * reserves in the same fixed order): each group spends when its own limits
 * all allow. When a group rejects, the groups before it are refunded and the
 * groups after it only checked (never spent), so the outcome is the one a
 * single call would give. A reservation is held from its group's call until
 * the refund returns: other requests in that window see it spent
 * (docs/decide-script.md). If a group's call fails (a shard down), the
 * earlier groups are refunded as far as their shards answer and the step
 * fails with that error. A spend whose slots one master serves is decided
 * whole, in one call there, when it has no request id; if its slots turn out
 * to be apart it goes group by group from the next phase on.
 *
 * With a request id the first group's call claims it (the memo, 'pending')
 * or answers the decision remembered under it; the whole decision is stored
 * once known, and a retry meanwhile waits for it. A settlement adjusts the
 * record's group first, then the others, each once by its mark. Other modes
 * read or write each group on its own: nothing is decided, so nothing needs
 * all or nothing.
 */
export async function decideAcrossSlots(
  scripts: ScriptSteps,
  steps: readonly DecideStep[],
  groupsOf: (calls: readonly LimitCall[]) => SlotGroups,
): Promise<Array<GroupDecision | Error>> {
  const sagas = steps.map((step) => sagaOf(step, groupsOf(step.calls), scripts));
  const phase: ScriptStep[] = [];
  const owners: Saga[] = [];
  const tags: number[] = [];
  for (;;) {
    phase.length = owners.length = tags.length = 0;
    const now = performance.now();
    let wakeAt = Number.POSITIVE_INFINITY;
    for (const saga of sagas) {
      if (saga.done) continue;
      if (saga.notBefore > now) {
        wakeAt = Math.min(wakeAt, saga.notBefore);
        continue;
      }
      saga.next((step, tag) => {
        phase.push(step);
        owners.push(saga);
        tags.push(tag);
      });
    }
    if (phase.length === 0) {
      if (wakeAt === Number.POSITIVE_INFINITY) break;
      await new Promise((resolve) => setTimeout(resolve, wakeAt - now));
      continue;
    }
    if (phase.length > 1) sortByLimits(phase, owners, tags);
    let answers: Array<GroupDecision | Error>;
    try {
      answers = await scripts.run(phase);
    } catch (error) {
      answers = new Array<GroupDecision | Error>(phase.length).fill(asError(error));
    }
    for (let e = 0; e < phase.length; e++) owners[e]!.take(tags[e]!, phase[e]!, answers[e] ?? new Error('the store answered no decision'));
  }
  return Promise.all(sagas.map((saga) => saga.finish(scripts)));
}

function sagaOf(step: DecideStep, groups: SlotGroups, scripts: ScriptSteps): Saga {
  switch (step.mode) {
    case 'spend': {
      const placed = step.records?.memoAt(groups[0]![0]!) ?? step.memo;
      const memo = placed === undefined ? undefined : { key: placed.key, ttlMs: placed.ttlMs, count: step.calls.length, claim: true };
      return new SpendSaga(step.calls, groups, memo, memo === undefined && scripts.inOneCall(step.calls));
    }
    case 'settle':
      return new SettleSaga(step, groups);
    default:
      return new EachGroup(step, groups);
  }
}

/** A spend across slots: reserve group by group, refund on a rejection (decideAcrossSlots). */
class SpendSaga implements Saga {
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

/**
 * A settlement across slots: the record's group settles and marks the
 * record in one call; then, unless the record says there is nothing to settle,
 * each other group is adjusted by the difference with a mark in its own slot,
 * set in the same call, that makes it apply once (every Settle, retries
 * included, sends them all).
 */
class SettleSaga implements Saga {
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

/** Every other mode: each group on its own, in one phase; the first error fails the step. */
class EachGroup implements Saga {
  done = false;
  notBefore = 0;
  private readonly outcomes: LimitOutcome[];
  private error: Error | undefined;
  private nowMs = 0;

  constructor(
    private readonly step: DecideStep,
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

/**
 * Orders a phase's steps by the limits they decide (stable): a batch sends
 * the arguments of consecutive calls of one shape once (decide-batch.ts), and
 * requests' first groups alternate between user and tenant limits as their
 * slots fall. Left as they are when one state is decided by steps of two
 * shapes (a limit two policies share), whose order must not change.
 */
function sortByLimits(phase: ScriptStep[], owners: Saga[], tags: number[]): void {
  const order = new Array<number>(phase.length);
  const shape = new Array<string>(phase.length);
  const shapeOfState = new Map<string, string>();
  for (let e = 0; e < phase.length; e++) {
    order[e] = e;
    const calls = phase[e]!.calls;
    let text = calls[0]!.limit.name;
    for (let j = 1; j < calls.length; j++) text += `\n${calls[j]!.limit.name}`;
    shape[e] = text;
    for (let j = 0; j < calls.length; j++) {
      const seen = shapeOfState.get(calls[j]!.identityKey);
      if (seen === undefined) shapeOfState.set(calls[j]!.identityKey, text);
      else if (seen !== text) return;
    }
  }
  order.sort((a, b) => (shape[a]! < shape[b]! ? -1 : shape[a]! > shape[b]! ? 1 : a - b));
  const [p, o, t] = [phase.slice(), owners.slice(), tags.slice()];
  for (let e = 0; e < order.length; e++) {
    const from = order[e]!;
    phase[e] = p[from]!;
    owners[e] = o[from]!;
    tags[e] = t[from]!;
  }
}

/** The calls of a group, with another cost when given. */
function pick(calls: readonly LimitCall[], group: readonly number[], cost?: number): LimitCall[] {
  const picked = new Array<LimitCall>(group.length);
  for (let j = 0; j < group.length; j++) picked[j] = cost === undefined ? calls[group[j]!]! : { ...calls[group[j]!]!, cost };
  return picked;
}

function place(outcomes: LimitOutcome[], group: readonly number[], got: readonly LimitOutcome[]): void {
  for (let j = 0; j < group.length; j++) outcomes[group[j]!] = got[j]!;
}

function allAllowed(outcomes: readonly LimitOutcome[]): boolean {
  for (let i = 0; i < outcomes.length; i++) if (!outcomes[i]!.allowed) return false;
  return true;
}
