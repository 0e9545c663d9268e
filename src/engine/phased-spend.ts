import type { GroupDecision, LimitCall, LimitOutcome } from '@quota-service/core';
import type { DecideStep, QuotaStore } from '../store/store.js';
import { SlotsApart } from '../store/store-errors.js';
import type { SlotGroups } from './slot-groups.js';

/** A request whose limits live in more than one slot: its store calls and their slot groups (slotGroups). */
export interface PhasedRequest {
  readonly calls: readonly LimitCall[];
  readonly groups: SlotGroups;
}

/** Where a request stands between phases. */
const GOING = 0;
const REJECTED = 1;
const FAILED = 2;
const DONE = 3;

/** In place of a group: the request's whole decision in one call (QuotaStore.decidesInOneCall). */
const WHOLE = -1;

/**
 * spendAcrossSlots (src/engine/slot-groups.ts) for many requests at once, in
 * phases: each phase is one decideGroups for every request still going, so
 * the store sends it as one batched script call per master. Phase one spends
 * every request's first slot group (a reservation when it allows), phase two
 * the second group of those whose first allowed, and so on. A request whose
 * group rejects is refunded and has its later groups checked in the next
 * phase, as spendAcrossSlots does in one round; a request whose call failed is
 * refunded as far as the shards answer and fails with that call's error. A
 * user + tenant policy thus costs two batched round trips per turn, not two
 * script calls per request. A request whose slots one master serves is
 * decided whole in phase one, in one call there (all or nothing, as on one
 * node); if its slots turn out to be apart, it goes group by group from the
 * next phase on.
 *
 * Each request ends as spendAcrossSlots would end it: its outcomes, or the
 * error its decision failed with. Requests of one batch that share a key see
 * each other's reservations, as concurrent requests do (docs/decide-script.md,
 * "The reservation window"): the result can deny more than one-by-one
 * decisions would, never grant more. No request id: a request with one is
 * decided by spendAcrossSlots, which remembers its decision.
 */
export async function spendInPhases(store: QuotaStore, requests: readonly PhasedRequest[]): Promise<Array<LimitOutcome[] | Error>> {
  const count = requests.length;
  const results = new Array<LimitOutcome[] | Error>(count);
  const state = new Uint8Array(count);
  /** The next group to spend (GOING), or the group that rejected (REJECTED). */
  const at = new Uint8Array(count);
  /** Per request, [group, spentAtMs] pairs of its reservations; undefined while it holds none. */
  const reserved = new Array<number[] | undefined>(count);
  /** 1: decided whole, in one call, in phase one. */
  const whole = new Uint8Array(count);
  for (let r = 0; r < count; r++) {
    results[r] = new Array<LimitOutcome>(requests[r]!.calls.length);
    if (store.decidesInOneCall?.(requests[r]!.calls) === true) whole[r] = 1;
  }

  const list: (readonly LimitCall[])[] = [];
  const steps: DecideStep[] = [];
  /** Per entry of a phase: its request, its group, and the step's mode. */
  const owners: number[] = [];
  const groupsOf: number[] = [];
  for (;;) {
    list.length = steps.length = owners.length = groupsOf.length = 0;
    const add = (r: number, g: number, step: DecideStep) => {
      list.push(pick(requests[r]!, g));
      steps.push(step);
      owners.push(r);
      groupsOf.push(g);
    };
    for (let r = 0; r < count; r++) {
      const { groups } = requests[r]!;
      if (state[r] === GOING) add(r, whole[r] === 1 ? WHOLE : at[r]!, SPEND);
      else if (state[r] === REJECTED || state[r] === FAILED) {
        const held = reserved[r];
        if (held !== undefined) for (let i = 0; i < held.length; i += 2) add(r, held[i]!, { mode: 'refund', spentAtMs: held[i + 1]! });
        // After a rejection, the groups after it are asked for their own status (never spent).
        if (state[r] === REJECTED) for (let g = at[r]! + 1; g < groups.length; g++) add(r, g, CHECK);
        state[r] = DONE;
      }
    }
    if (list.length === 0) return results;
    if (list.length > 1) sortByLimits(list, steps, owners, groupsOf);

    let answers: Array<GroupDecision | Error>;
    try {
      answers = await store.decideGroups(list, steps);
    } catch (error) {
      answers = new Array<GroupDecision | Error>(list.length).fill(error instanceof Error ? error : new Error(String(error)));
    }
    for (let e = 0; e < list.length; e++) {
      const r = owners[e]!;
      const g = groupsOf[e]!;
      const answer = answers[e] ?? new Error(`no answer for group ${g}`);
      const mode = steps[e]!.mode;
      const outcomes = results[r];
      if (g === WHOLE) {
        // Slots apart after all: group by group from the next phase on. Else decided, all or nothing.
        if (answer instanceof SlotsApart) whole[r] = 0;
        else {
          results[r] = answer instanceof Error ? answer : answer.outcomes;
          state[r] = DONE;
        }
        continue;
      }
      if (mode === 'spend') {
        if (answer instanceof Error) {
          // Refund what it holds in the next phase, then answer the error.
          state[r] = reserved[r] === undefined ? DONE : FAILED;
          results[r] = answer;
          continue;
        }
        place(outcomes as LimitOutcome[], requests[r]!.groups[g]!, answer.outcomes);
        if (allAllowed(answer.outcomes)) {
          const held = reserved[r];
          if (held === undefined) reserved[r] = [g, answer.nowMs];
          else held.push(g, answer.nowMs);
          at[r] = g + 1;
          if (g + 1 === requests[r]!.groups.length) state[r] = DONE;
        } else {
          at[r] = g;
          state[r] = REJECTED;
        }
        continue;
      }
      // A refund or a check: a failed request's refund is best effort; after a
      // rejection, an error fails the request, as in spendAcrossSlots.
      if (outcomes instanceof Error) continue;
      if (answer instanceof Error) results[r] = answer;
      else place(outcomes as LimitOutcome[], requests[r]!.groups[g]!, answer.outcomes);
    }
  }
}

/**
 * Orders a phase's entries by the limits they decide (stable): a batch sends
 * the arguments of consecutive calls of one shape once (decide-batch.ts), and
 * requests' first groups alternate between user and tenant limits as their
 * slots fall. Left as they are when one state is decided by entries of two
 * shapes (a limit two policies share), whose order must not change.
 */
function sortByLimits(list: (readonly LimitCall[])[], steps: DecideStep[], owners: number[], groupsOf: number[]): void {
  const order = new Array<number>(list.length);
  const shape = new Array<string>(list.length);
  const shapeOfState = new Map<string, string>();
  for (let e = 0; e < list.length; e++) {
    order[e] = e;
    const calls = list[e]!;
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
  const [l, s, o, g] = [list.slice(), steps.slice(), owners.slice(), groupsOf.slice()];
  for (let e = 0; e < order.length; e++) {
    const from = order[e]!;
    list[e] = l[from]!;
    steps[e] = s[from]!;
    owners[e] = o[from]!;
    groupsOf[e] = g[from]!;
  }
}

const SPEND: DecideStep = Object.freeze({ mode: 'spend' });
const CHECK: DecideStep = Object.freeze({ mode: 'check' });

/** The calls of a request's group `g`, or all of them (WHOLE). */
function pick({ calls, groups }: PhasedRequest, g: number): readonly LimitCall[] {
  if (g === WHOLE) return calls;
  const group = groups[g]!;
  const picked = new Array<LimitCall>(group.length);
  for (let j = 0; j < group.length; j++) picked[j] = calls[group[j]!]!;
  return picked;
}

function place(outcomes: LimitOutcome[], group: readonly number[], got: readonly LimitOutcome[]): void {
  for (let j = 0; j < group.length; j++) outcomes[group[j]!] = got[j]!;
}

function allAllowed(outcomes: readonly LimitOutcome[]): boolean {
  for (let i = 0; i < outcomes.length; i++) if (!outcomes[i]!.allowed) return false;
  return true;
}
