import { asError, type GroupDecision, type LimitCall } from '@quota-service/core';
import type { ScriptedStep } from '../../store.js';
import { EachGroup } from './each-group.js';
import type { Saga, ScriptStep, ScriptSteps, SlotGroups } from './saga.js';
import { SettleSaga } from './settle-saga.js';
import { SpendSaga } from './spend-saga.js';

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
  steps: readonly ScriptedStep[],
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

function sagaOf(step: ScriptedStep, groups: SlotGroups, scripts: ScriptSteps): Saga {
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
