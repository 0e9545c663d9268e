import {
  encodeRemembered,
  type GroupDecision,
  type LimitCall,
  type LimitOutcome,
  type Memo,
  replayedLeaseCalls,
  StoreUnavailableError,
  withLeasesNow,
} from '@quota-service/core';
import type { QuotaStore } from '../store/store.js';
import { SlotsApart } from '../store/store-errors.js';

/** A retry that finds its request still being decided (cross-slot) looks again this often, this many times. */
const PENDING_POLL_MS = 5;
const PENDING_POLLS = 100;

/** The groups of a one-limit request, shared (read-only) rather than allocated per request. */
const ONE_CALL: SlotGroups = Object.freeze([Object.freeze([0])]);

/** Indexes into a request's calls, one list per script call; never mutated once made. */
export type SlotGroups = readonly (readonly number[])[];

/**
 * The calls of one request split into groups that one script call can decide
 * atomically: one group on a store without slots, else one per hash slot,
 * sorted by slot so every request reserves in the same fixed order. Each
 * group lists indexes into `calls`.
 */
export function slotGroups(store: QuotaStore, calls: readonly LimitCall[]): SlotGroups {
  if (calls.length === 1) return ONE_CALL;
  const all = () => [calls.map((_, i) => i)];
  if (calls.length === 0 || store.slotOf === undefined) return all();
  const slots = new Array<number>(calls.length);
  for (let i = 0; i < calls.length; i++) {
    const call = calls[i]!;
    const slot = call.slot ?? store.slotOf(call.identityKey);
    if (slot === undefined) return all();
    slots[i] = slot;
  }
  // By slot, and within a slot in the calls' order.
  const order = calls.map((_, i) => i).sort((a, b) => slots[a]! - slots[b]! || a - b);
  const groups: number[][] = [];
  let last = -1;
  for (const i of order) {
    if (slots[i] === last) groups[groups.length - 1]!.push(i);
    else {
      groups.push([i]);
      last = slots[i]!;
    }
  }
  return groups;
}

/** The partition the first reservation goes to (slot order): its breaker and budget apply. Undefined on a store of one part. */
export function firstPartition(store: QuotaStore, calls: readonly LimitCall[], groups: SlotGroups): string | undefined {
  const first = calls[groups[0]?.[0] ?? 0];
  return store.partitionOf?.(first?.identityKey ?? '', first?.slot);
}

/**
 * Spends on every limit or on none. Keys in one slot: one script
 * call checks all and writes all or none. Keys across slots (a cluster): each
 * slot group is decided in turn, in slot order, and spends when its own
 * limits all allow (a reservation); when a group rejects, the groups before
 * it are refunded and the groups after it only checked (never spent), so the
 * outcome is the one a single call would give. A reservation is held from its
 * group's call until the refund call returns: other requests in that window
 * see it spent (docs/decide-script.md). If a group's call fails (a shard
 * down), the earlier groups are refunded as far as their shards answer and
 * the error propagates to the failure policy.
 *
 * With `memo` (a request id, idempotent Allow) the first group's call also
 * answers a remembered decision, or remembers this one, in the same script
 * call as the spend: concurrent retries cannot both spend. A cross-slot
 * decision claims the id in that call and stores the whole decision once
 * known; a retry meanwhile waits for it.
 *
 * Without `memo`, keys in several slots that one master serves are decided
 * in one call there (QuotaStore.decidesInOneCall), atomically, with no
 * reservation; group by group only if the slots turn out to be apart.
 */
export function spendAcrossSlots<R>(
  store: QuotaStore,
  calls: readonly LimitCall[],
  memo: Omit<Memo, 'claim' | 'count'> | undefined,
  /** slotGroups(store, calls). */
  groups: SlotGroups,
  /** What the caller makes of the outcomes, applied in the same step: no promise of its own per request. */
  then: (outcomes: LimitOutcome[]) => R,
  /** With `memo`: called when this call made a reservation (allowed, not a replay). */
  onReserved?: () => void,
): Promise<R> {
  const full = memo === undefined ? undefined : { ...memo, count: calls.length, claim: groups.length > 1 };
  // One group (the usual case): the store's answer, without an async frame of its own per request.
  if (groups.length === 1) {
    return store.decideGroup(calls, 'spend', full === undefined ? {} : { memo: full }).then((decision) => {
      // A replay's leases are as held now: its script call spent them again (decide.lua).
      if (onReserved !== undefined && decision.replayed !== true && allAllowed(decision.outcomes)) onReserved();
      return then(decision.outcomes);
    });
  }
  if (full === undefined && store.decidesInOneCall?.(calls) === true) {
    return store.decideGroup(calls, 'spend').then(
      (decision) => then(decision.outcomes),
      (error: unknown) => {
        if (!(error instanceof SlotsApart)) throw error;
        return spendGroupByGroup(store, calls, groups, undefined, undefined).then(then);
      },
    );
  }
  return spendGroupByGroup(store, calls, groups, full, onReserved).then(then);
}

function allAllowed(outcomes: readonly LimitOutcome[]): boolean {
  for (const outcome of outcomes) if (!outcome.allowed) return false;
  return true;
}

/** spendAcrossSlots for keys in more than one slot: reserve group by group, refund on a rejection. */
async function spendGroupByGroup(
  store: QuotaStore,
  calls: readonly LimitCall[],
  groups: SlotGroups,
  full: Memo | undefined,
  onReserved: (() => void) | undefined,
): Promise<LimitOutcome[]> {
  const outcomes: LimitOutcome[] = [];
  const pick = (group: readonly number[]) => group.map((i) => calls[i]!);
  const place = (group: readonly number[], got: readonly LimitOutcome[]) => {
    for (const [j, i] of group.entries()) outcomes[i] = got[j]!;
  };
  const reserved: { group: readonly number[]; spentAtMs: number }[] = [];
  const refundAll = () =>
    Promise.all(reserved.map(async ({ group, spentAtMs }) => place(group, (await store.decideGroup(pick(group), 'refund', { spentAtMs })).outcomes)));
  let decidedAt = 0;
  for (const [g, group] of groups.entries()) {
    let decision: GroupDecision;
    try {
      if (g === 0 && full !== undefined) {
        decision = await firstWithMemo(store, pick(group), full);
        if (decision.replayed) return leasesNow(store, calls, decision.outcomes, asIs);
      } else {
        decision = await store.decideGroup(pick(group), 'spend');
      }
    } catch (error) {
      await refundAll().catch(() => {});
      // Forget the claim: the request was not decided, a retry decides anew.
      if (full !== undefined && g > 0) await store.remember(full, '').catch(() => {});
      throw error;
    }
    decidedAt = g === 0 ? decision.nowMs : decidedAt;
    place(group, decision.outcomes);
    if (decision.outcomes.every((o) => o.allowed)) {
      reserved.push({ group, spentAtMs: decision.nowMs });
      continue;
    }
    // Rejected: undo the reservations, and ask the rest (without spending) for
    // their own status, so denied_by and limits[] are what one call would give.
    const later = groups.slice(g + 1);
    await Promise.all([refundAll(), ...later.map(async (rest) => place(rest, (await store.decideGroup(pick(rest), 'check')).outcomes))]);
    return remembered(store, full, calls, outcomes, decidedAt, reserved);
  }
  onReserved?.();
  return remembered(store, full, calls, outcomes, decidedAt, reserved);
}

/**
 * A replayed decision (a retry with the same request id) of a request across
 * slots, with its leases as the store holds them now (one slot group's
 * replay does this in its own script call): an allowed one's lease calls are spent again,
 * alone and all or nothing (replayed-leases.ts). A lease still held is found
 * held, one released or expired is acquired again when there is room, and
 * else the concurrency limit denies the retry.
 */
function leasesNow<R>(store: QuotaStore, calls: readonly LimitCall[], remembered: LimitOutcome[], then: (outcomes: LimitOutcome[]) => R): R | Promise<R> {
  const places = replayedLeaseCalls(calls, remembered);
  if (places === undefined) return then(remembered);
  const leases = places.map((i) => calls[i]!);
  return spendAcrossSlots(store, leases, undefined, slotGroups(store, leases), (now) => then(withLeasesNow(remembered, places, now)));
}

const asIs = (outcomes: LimitOutcome[]) => outcomes;

/** The first group of a cross-slot request with a request id: claims it, or replays (waiting while it is pending). */
async function firstWithMemo(store: QuotaStore, calls: readonly LimitCall[], memo: Memo): Promise<GroupDecision> {
  for (let poll = 0; poll < PENDING_POLLS; poll++) {
    const decision = await store.decideGroup(calls, 'spend', { memo });
    if (!decision.pending) return decision;
    await new Promise((resolve) => setTimeout(resolve, PENDING_POLL_MS));
  }
  throw new StoreUnavailableError(new Error('an earlier call with this request_id is still being decided'));
}

/**
 * Stores a cross-slot decision under its claimed request id, then answers it;
 * with the reservation a settlement needs: the cost and when each limit spent
 * it (its group's time; a group that spent nothing, its first group's).
 */
async function remembered(
  store: QuotaStore,
  memo: Memo | undefined,
  calls: readonly LimitCall[],
  outcomes: LimitOutcome[],
  nowMs: number,
  reserved: readonly { group: readonly number[]; spentAtMs: number }[],
): Promise<LimitOutcome[]> {
  if (memo === undefined) return outcomes;
  const spentAtMs = calls.map(() => nowMs);
  for (const { group, spentAtMs: at } of reserved) for (const i of group) spentAtMs[i] = at;
  // Not fatal: the request was decided. A retry then finds 'pending' until the
  // claim expires and gets UNAVAILABLE (docs/policies.md, "Idempotent Allow").
  await store.remember(memo, encodeRemembered({ outcomes, nowMs }, { estimate: calls[0]?.cost ?? 0, spentAtMs })).catch(() => {});
  return outcomes;
}

/** Every limit's status, spending nothing: one peek per slot group, in parallel. */
export async function peekAcrossSlots(store: QuotaStore, calls: readonly LimitCall[], groups = slotGroups(store, calls)): Promise<LimitOutcome[]> {
  if (groups.length === 1) return store.decideAll(calls, 'peek');
  const outcomes: LimitOutcome[] = [];
  await Promise.all(
    groups.map(async (group) => {
      const got = await store.decideAll(
        group.map((i) => calls[i]!),
        'peek',
      );
      for (const [j, i] of group.entries()) outcomes[i] = got[j]!;
    }),
  );
  return outcomes;
}
