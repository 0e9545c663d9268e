import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { parsePolicies, type SourcelessDecision } from '@quota-service/core';
import { createLogger } from '../../src/logger.js';
import { StoreTimeoutError, TurnDeadlines } from '../../src/engine/deadline.js';
import { StoreFailurePolicy, type StoreFailureKind } from '../../src/engine/failure.js';
import { decideLimit } from '../support/store-calls.js';

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
/** Advances virtual time, then lets the deadline's check run: it waits for the event loop's I/O (setImmediate, real). */
async function advance(ms: number): Promise<void> {
  await vi.advanceTimersByTimeAsync(ms);
  await new Promise((resolve) => setImmediate(resolve));
}
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
  it('calls raced on one partition expire together, however the silence grows while the check runs', async () => {
    // The store's silence, read again for every call: just under the budget the first time, far over it after.
    const readings = [19.999];
    const deadlines = new TurnDeadlines(20, () => () => readings.shift() ?? 1_000);
    const deadline = deadlines.start();
    const inner = track(deadline.race(hung(), 'p'));
    const outer = track(deadline.race(hung(), 'p'));
    await advance(20);
    // Read once for both: not yet silent for the whole budget.
    expect([inner.state, outer.state]).toEqual(['pending', 'pending']);
    await advance(1);
    // The timer was set again for what the reading left of the budget (at least 1 ms).
    await new Promise((resolve) => setImmediate(resolve));
    expect([inner.state, outer.state]).toEqual(['timeout', 'timeout']);
  });

  it('a store without a silence probe: its calls fail when the timer fires, also when it fires late', async () => {
    const deadlines = new TurnDeadlines(20);
    const call = track(deadlines.start().race(hung(), 'p'));
    // This process cannot run for 30 ms (real time, which the timer's lateness is read in).
    const until = performance.now() + 30;
    while (performance.now() < until) {
      // busy: a stalled event loop
    }
    await advance(20);
    expect(call.state).toBe('timeout');
  });

  it('a call started in a later turn gets its own full budget, not the rest of an earlier one', async () => {
    const deadlines = new TurnDeadlines(20);
    const first = track(deadlines.start().race(hung(), 'p'));
    await advance(15);
    const second = track(deadlines.start().race(hung(), 'p'));
    await advance(5);
    expect(first.state).toBe('timeout');
    expect(second.state).toBe('pending');
    await advance(15);
    expect(second.state).toBe('timeout');
  });

  it('the calls of one turn share a deadline: all time out together, an answered one is not touched', async () => {
    const deadlines = new TurnDeadlines(20);
    let answer: (value: string) => void = () => {};
    const answered = deadlines.start().race(new Promise<string>((resolve) => (answer = resolve)), 'p');
    const hanging = Array.from({ length: 3 }, () => track(deadlines.start().race(hung(), 'p')));
    answer('store');
    expect(await answered).toBe('store');
    await advance(19);
    expect(hanging.map((h) => h.state)).toEqual(['pending', 'pending', 'pending']);
    await advance(1);
    expect(hanging.map((h) => h.state)).toEqual(['timeout', 'timeout', 'timeout']);
  });

  it('the budget bounds silence, not the wait: a call on a store that keeps answering waits on, and fails once the store has said nothing for the whole budget', async () => {
    let silentMs = 0;
    const deadlines = new TurnDeadlines(20, () => () => silentMs);
    const busy = track(deadlines.start().race(hung(), 'p'));
    // The store answered other calls 5 ms ago: busy, not down.
    silentMs = 5;
    await advance(20);
    expect(busy.state).toBe('pending');
    // It went quiet: the rest of the budget (15 ms) after the last answer, and the call fails.
    silentMs = 19;
    await advance(14);
    expect(busy.state).toBe('pending');
    silentMs = 20;
    await advance(1);
    expect(busy.state).toBe('timeout');
  });

  it('silence is per partition: a quiet shard fails its own calls, a busy one keeps its own', async () => {
    const silent: Record<string, number> = { quiet: 25, busy: 3 };
    const deadlines = new TurnDeadlines(20, () => (partition) => silent[partition]!);
    const onQuiet = track(deadlines.start().race(hung(), 'quiet'));
    const onBusy = track(deadlines.start().race(hung(), 'busy'));
    await advance(20);
    expect([onQuiet.state, onBusy.state]).toEqual(['timeout', 'pending']);
  });

  it('a deadline released by all its calls is not joined again: a new call in the same turn gets a fresh one', async () => {
    const deadlines = new TurnDeadlines(20);
    deadlines.start().release();
    const late = track(deadlines.start().race(hung(), 'p'));
    await advance(20);
    // Released means its timer was cleared: joining it would have left this call unbounded.
    expect(late.state).toBe('timeout');
  });

  it('a later turn on a deadline its calls released (its timer set again, not made anew) gets a full budget from its own start', async () => {
    const deadlines = new TurnDeadlines(20);
    const first = deadlines.start();
    expect(await first.race(Promise.resolve('store'), 'p')).toBe('store');
    first.release();
    await advance(15);
    const next = track(deadlines.start().race(hung(), 'p'));
    // Five ms after the first turn's budget would have run out: this call's own budget has 5 ms to go.
    await advance(10);
    expect(next.state).toBe('pending');
    await advance(10);
    expect(next.state).toBe('timeout');
  });

  it('of several deadlines released together, one is kept for the next turn and the others leave no timer behind', async () => {
    const deadlines = new TurnDeadlines(20);
    const overlapping = [];
    for (let turn = 0; turn < 3; turn++) {
      overlapping.push(deadlines.start());
      // The next start() is another turn's: a new deadline, while this one is still held.
      await Promise.resolve();
    }
    expect(vi.getTimerCount()).toBe(3);
    for (const deadline of overlapping) deadline.release();
    expect(vi.getTimerCount()).toBe(1);
  });

  it('a released deadline whose timer runs out unused expires nothing, and the next turn still gets its full budget', async () => {
    const deadlines = new TurnDeadlines(20);
    deadlines.start().release();
    await advance(30);
    const next = track(deadlines.start().race(hung(), 'p'));
    await advance(19);
    expect(next.state).toBe('pending');
    await advance(1);
    expect(next.state).toBe('timeout');
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
        const outcome = await decideLimit(local, limit, `rl:v1:${limit.name}:user:{u}`, 1);
        return { allowed: outcome.allowed, retryAfterMs: outcome.retryAfterMs, deniedBy: '', limits: [], delayMs: 0 };
      }),
    );
    await advance(19);
    expect(kinds).toEqual([]);
    await advance(1);
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
