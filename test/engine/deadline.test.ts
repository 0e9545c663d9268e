import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { parsePolicies, type SourcelessDecision } from '@quota-service/core';
import { createLogger } from '../../src/logger.js';
import { StoreTimeoutError, TurnDeadlines } from '../../src/engine/deadline.js';
import { StoreFailurePolicy, type StoreFailureKind } from '../../src/engine/failure.js';

/**
 * The store calls of one turn (an AllowBatch) share one timer; each call must
 * still be bounded by its own budget and get its own answer. Virtual clock:
 * only setTimeout/clearTimeout are faked, microtasks (the turn boundary) are real.
 */
beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
});
afterEach(() => {
  vi.useRealTimers();
});

const hung = () => new Promise<never>(() => {});
/** Where a promise stands, read at any time without waiting for it (handled from the start). */
function track(promise: Promise<unknown>): { state: 'pending' | 'resolved' | 'timeout' | 'other' } {
  const tracked: { state: 'pending' | 'resolved' | 'timeout' | 'other' } = { state: 'pending' };
  promise.then(
    () => (tracked.state = 'resolved'),
    (error: unknown) => (tracked.state = error instanceof StoreTimeoutError ? 'timeout' : 'other'),
  );
  return tracked;
}

describe('turn deadlines', () => {
  it('a call started in a later turn gets its own full budget, not the rest of an earlier one', async () => {
    const deadlines = new TurnDeadlines(20);
    const first = track(deadlines.start().race(hung()));
    await vi.advanceTimersByTimeAsync(15);
    const second = track(deadlines.start().race(hung()));
    await vi.advanceTimersByTimeAsync(5);
    expect(first.state).toBe('timeout');
    expect(second.state).toBe('pending');
    await vi.advanceTimersByTimeAsync(15);
    expect(second.state).toBe('timeout');
  });

  it('the calls of one turn share a deadline: all time out together, an answered one is not touched', async () => {
    const deadlines = new TurnDeadlines(20);
    let answer: (value: string) => void = () => {};
    const answered = deadlines.start().race(new Promise<string>((resolve) => (answer = resolve)));
    const hanging = Array.from({ length: 3 }, () => track(deadlines.start().race(hung())));
    answer('store');
    expect(await answered).toBe('store');
    await vi.advanceTimersByTimeAsync(19);
    expect(hanging.map((h) => h.state)).toEqual(['pending', 'pending', 'pending']);
    await vi.advanceTimersByTimeAsync(1);
    expect(hanging.map((h) => h.state)).toEqual(['timeout', 'timeout', 'timeout']);
  });

  it('a deadline released by all its calls is not joined again: a new call in the same turn gets a fresh one', async () => {
    const deadlines = new TurnDeadlines(20);
    deadlines.start().release();
    const late = track(deadlines.start().race(hung()));
    await vi.advanceTimersByTimeAsync(20);
    // Released means its timer was cleared: joining it would have left this call unbounded.
    expect(late.state).toBe('timeout');
  });
});

describe('store failure policy on a batch (one turn)', () => {
  const policies = parsePolicies(`
policies:
  open: { failure_mode: fail_open, limits: [{ name: open, key_by: user, algorithm: token_bucket, capacity: 4, refill_per_second: 1 }] }
  closed: { failure_mode: fail_closed, limits: [{ name: closed, key_by: user, algorithm: token_bucket, capacity: 4, refill_per_second: 1 }] }
  local: { failure_mode: local, local_share: 0.5, limits: [{ name: local, key_by: user, algorithm: token_bucket, capacity: 4, refill_per_second: 1 }] }
`);

  it('a hanging store: every request of the batch gets its own policy failure mode at the budget, each counted as a timeout', async () => {
    const kinds: StoreFailureKind[] = [];
    const failure = new StoreFailurePolicy({
      timeoutMs: 20,
      breakerFailures: 1_000,
      halfOpenAfterMs: 60_000,
      logger: createLogger('silent'),
      events: { storeFailure: (kind) => kinds.push(kind), circuitStates: () => {} },
    });
    const names = ['open', 'closed', 'local', 'open', 'local', 'closed'];
    const decisions = names.map((name) =>
      failure.decide(policies.get(name)!, hung as () => Promise<SourcelessDecision>, async (local, scale) => {
        const limit = scale(policies.get(name)!.limits[0]!);
        const outcome = await local.decide(limit, `rl:v1:${limit.name}:user:{u}`, 1);
        return { allowed: outcome.allowed, retryAfterMs: outcome.retryAfterMs, deniedBy: '', limits: [], delayMs: 0 };
      }),
    );
    await vi.advanceTimersByTimeAsync(19);
    expect(kinds).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect((await Promise.all(decisions)).map((d) => [d.source, d.allowed])).toEqual([
      ['fail_open', true],
      ['fail_closed', false],
      ['local', true],
      ['fail_open', true],
      ['local', true],
      ['fail_closed', false],
    ]);
    expect(kinds).toEqual(Array(6).fill('timeout'));
    await failure.close();
  });
});
