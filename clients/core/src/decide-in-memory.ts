import { encodeRemembered, parseRemembered } from './decide-reply.js';
import type { MemorySpace } from './algorithms/memory-space.js';
import type { DecideMode, DecideOptions, GroupDecision, LimitCall } from './types.js';

/**
 * One all-or-nothing step on an in-memory key space, by the same rules as the
 * Redis driver script: every limit is checked first, then (mode 'spend') all
 * spend or none does. Synchronous, so nothing can interleave: that is what
 * makes it atomic within one process.
 */
export function decideInMemory(space: MemorySpace, calls: readonly LimitCall[], mode: DecideMode, nowMs: number, options: DecideOptions = {}): GroupDecision {
  const { spentAtMs, memo } = options;
  if (memo !== undefined && mode === 'spend') {
    const seen = space.get<string>(memo.key, nowMs);
    if (seen !== undefined) return parseRemembered(seen, memo.count);
    const decision = decideNow(space, calls, mode, nowMs, spentAtMs);
    space.set(memo.key, memo.claim ? 'pending' : encodeRemembered(decision), memo.ttlMs, nowMs);
    return decision;
  }
  return decideNow(space, calls, mode, nowMs, spentAtMs);
}

function decideNow(space: MemorySpace, calls: readonly LimitCall[], mode: DecideMode, now: number, spentAtMs: number | undefined): GroupDecision {
  const unchanged = ({ limit, identityKey }: LimitCall) => limit.algorithm.decideInMemory(space, identityKey, limit.params, 0, now).outcome;
  if (mode === 'refund') {
    if (spentAtMs === undefined) throw new Error('refund needs the time of the spend');
    // A check-only call spent nothing: there is nothing to give back.
    for (const { limit, identityKey, cost, checkOnly } of calls)
      if (!checkOnly) limit.algorithm.refundInMemory(space, identityKey, limit.params, cost, now, spentAtMs);
    return { outcomes: calls.map(unchanged), nowMs: now };
  }
  const decided = calls.map(({ limit, identityKey, cost }) => limit.algorithm.decideInMemory(space, identityKey, limit.params, cost, now));
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
