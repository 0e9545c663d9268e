import { encodeRemembered, parseRemembered } from './remembered-decision.js';
import type { MemorySpace } from './algorithms/memory-space.js';
import { replayedLeaseCalls, withLeasesNow } from './replayed-leases.js';
import type { DecideMode, DecideOptions, GroupDecision, LimitCall, LimitOutcome, Memo } from './types.js';

/**
 * One all-or-nothing step on an in-memory key space, by the same rules as the
 * Redis driver script: every limit is checked first, then (mode 'spend') all
 * spend or none does. Synchronous, so nothing can interleave: that is what
 * makes it atomic within one process.
 */
export function decideInMemory(space: MemorySpace, calls: readonly LimitCall[], mode: DecideMode, nowMs: number, options: DecideOptions = {}): GroupDecision {
  const { spentAtMs, memo } = options;
  if (mode === 'settle') {
    if (memo === undefined || options.actualCost === undefined) throw new Error('settle needs the memo and the actual cost');
    return settleInMemory(space, calls, memo, options.actualCost, options.memoIndex ?? 0, nowMs);
  }
  if (memo !== undefined && mode === 'spend') {
    const seen = space.get<string>(memo.key, nowMs);
    if (seen !== undefined) return leasesHeldNow(space, calls, parseRemembered(seen, memo.count), nowMs);
    const decision = decideNow(space, calls, mode, nowMs, spentAtMs);
    const reservation = { estimate: calls[0]?.cost ?? 0, spentAtMs: calls.map(() => nowMs) };
    space.set(memo.key, memo.claim ? 'pending' : encodeRemembered(decision, reservation), memo.ttlMs, nowMs);
    return decision;
  }
  if ((mode === 'refund' || mode === 'charge') && memo !== undefined) {
    // A settlement's later slot group: once per memo key (decide.lua).
    if (space.get<string>(memo.key, nowMs) !== undefined) return { outcomes: calls.map(unchangedOn(space, nowMs)), nowMs };
    const decision = decideNow(space, calls, mode, nowMs, spentAtMs);
    space.set(memo.key, '1', memo.ttlMs, nowMs);
    return decision;
  }
  return decideNow(space, calls, mode, nowMs, spentAtMs);
}

/**
 * A retry (same request id) of an allowed decision, with its leases as held
 * now (decide.lua does the same in the replay's own script call): the lease
 * calls are spent again, alone and all or nothing, so a lease still held is
 * found held (its time left, nothing written) and one released or expired
 * is acquired again when the set has room; else the retry is denied by the
 * concurrency limit. The other limits keep their remembered outcomes.
 */
function leasesHeldNow(space: MemorySpace, calls: readonly LimitCall[], replayed: GroupDecision, now: number): GroupDecision {
  // Only when this call holds every limit of the decision (one slot group); across
  // slots the Redis store does it with a call of its own.
  if (calls.length !== replayed.outcomes.length) return replayed;
  const places = replayedLeaseCalls(calls, replayed.outcomes);
  if (places === undefined) return replayed;
  const again = decideNow(
    space,
    places.map((i) => calls[i]!),
    'spend',
    now,
    undefined,
  );
  return { ...replayed, outcomes: withLeasesNow(replayed.outcomes, places, again.outcomes) };
}

const unchangedOn =
  (space: MemorySpace, now: number) =>
  ({ limit, identityKey }: LimitCall) =>
    limit.algorithm.decideInMemory(space, identityKey, limit.params, 0, now).outcome;

function decideNow(space: MemorySpace, calls: readonly LimitCall[], mode: DecideMode, now: number, spentAtMs: number | undefined): GroupDecision {
  const unchanged = unchangedOn(space, now);
  if (mode === 'refund') {
    if (spentAtMs === undefined) throw new Error('refund needs the time of the spend');
    // A check-only call spent nothing: there is nothing to give back.
    for (const { limit, identityKey, cost, checkOnly, lease } of calls)
      if (!checkOnly) limit.algorithm.refundInMemory(space, identityKey, limit.params, cost, now, spentAtMs, lease);
    return { outcomes: calls.map(unchanged), nowMs: now };
  }
  if (mode === 'release' || mode === 'renew') return leaseStep(space, calls, mode, now, unchanged);
  if (mode === 'charge') {
    // A check-only call is never spent, not even by a charge.
    for (const { limit, identityKey, cost, checkOnly } of calls) if (!checkOnly) limit.algorithm.chargeInMemory?.(space, identityKey, limit.params, cost, now);
    return { outcomes: calls.map(unchanged), nowMs: now };
  }
  const decided = calls.map(({ limit, identityKey, cost, lease }) => limit.algorithm.decideInMemory(space, identityKey, limit.params, cost, now, lease));
  const all = decided.every((d) => d.outcome.allowed);
  const spends = mode === 'spend' && all;
  // A denying limit's commit stores its refill, never a spend; a check-only call never spends.
  if (mode === 'spend' || mode === 'check') {
    for (let i = 0; i < decided.length; i++) {
      const d = decided[i]!;
      if ((spends && !calls[i]!.checkOnly) || !d.outcome.allowed) d.commit?.();
    }
  }
  const outcomes = decided.map((d, i) => (mode !== 'peek' && (!spends || calls[i]!.checkOnly) && d.outcome.allowed ? unchanged(calls[i]!) : d.outcome));
  return { outcomes, nowMs: now };
}

/**
 * Release or Renew (the driver's modes of the same names): each lease limit's
 * op on its member; a release writes what it found, a renew only when every
 * lease limit of the group holds the lease. Each outcome's `allowed` is
 * whether the lease was held (1 for the other limits), the rest its status after.
 */
function leaseStep(
  space: MemorySpace,
  calls: readonly LimitCall[],
  mode: 'release' | 'renew',
  now: number,
  unchanged: (call: LimitCall) => LimitOutcome,
): GroupDecision {
  const held: boolean[] = [];
  const commits: Array<(() => void) | undefined> = [];
  const expired: number[] = [];
  let all = true;
  for (const { limit, identityKey, lease } of calls) {
    const ops = limit.algorithm.lease;
    if (ops === undefined) {
      held.push(true);
      commits.push(undefined);
      expired.push(0);
      continue;
    }
    const step = lease === undefined ? { held: false, expired: 0 } : ops.opInMemory(space, identityKey, limit.params, lease, mode, now);
    held.push(step.held);
    commits.push(step.commit);
    expired.push(step.expired);
    if (!step.held) all = false;
  }
  const commitsRun = mode === 'release' || all;
  if (commitsRun) for (const commit of commits) commit?.();
  const outcomes = calls.map((call, i) => {
    const outcome: LimitOutcome = { ...unchanged(call), allowed: held[i]! };
    // As the driver: minus the expired leases its write dropped (LimitOutcome.leasesExpired).
    if (commitsRun && commits[i] !== undefined && expired[i]! > 0) outcome.leasesExpired = expired[i]!;
    return outcome;
  });
  return { outcomes, nowMs: now };
}

/**
 * Mode 'settle', as decide.lua's settle(): the reservation remembered at
 * `memo`, adjusted on `calls` by actual - estimate and marked settled once
 * (the memo keeps its expiry). `memoIndex`: the place of calls[0]'s limit among
 * the request's limits, whose spend time is this group's.
 */
function settleInMemory(space: MemorySpace, calls: readonly LimitCall[], memo: Memo, actualCost: number, memoIndex: number, now: number): GroupDecision {
  const none = (status: 'unknown' | 'pending' | 'denied'): GroupDecision => ({
    outcomes: [],
    nowMs: 0,
    settlement: { status, estimate: 0, actualCost: 0, spentAtMs: [] },
  });
  const seen = space.get<string>(memo.key, now);
  if (seen === undefined) return none('unknown');
  if (seen === 'pending') return none('pending');
  const fields = seen.split(' ');
  const count = (fields.length - 4) / 6;
  if (count < 1 || !Number.isInteger(count)) return none('unknown');
  if (fields[0] !== '1') return none('denied');
  const base = 5 * count + 2;
  const estimate = Number(fields[base]);
  const spentAtMs = fields.slice(base + 1, base + 1 + count).map(Number);
  const settled = fields[fields.length - 1]!;
  let actual = Number(settled);
  let status: 'settled' | 'applied' = 'settled';
  if (settled === '-') {
    status = 'applied';
    actual = actualCost;
    const delta = actual - estimate;
    const spentAt = spentAtMs[memoIndex]!;
    if (delta !== 0) {
      for (const { limit, identityKey, checkOnly } of calls) {
        // A check-only limit spent nothing; one without a charge counts no units (a lease).
        const charge = limit.algorithm.chargeInMemory;
        if (checkOnly || charge === undefined) continue;
        if (delta < 0) limit.algorithm.refundInMemory(space, identityKey, limit.params, -delta, now, spentAt);
        else charge.call(limit.algorithm, space, identityKey, limit.params, delta, now);
      }
    }
    // Like SET ... KEEPTTL.
    space.update(memo.key, `${seen.slice(0, -1)}${actual}`);
  }
  const outcomes: LimitOutcome[] = calls.map(unchangedOn(space, now));
  return { outcomes, nowMs: now, settlement: { status, estimate, actualCost: actual, spentAtMs } };
}
