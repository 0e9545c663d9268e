import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CallDeadlines } from '../../clients/quota-client/src/call-deadlines.js';

/** Calls' deadlines on one timer, on a virtual clock (timers and performance.now()). */
beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

interface Call {
  name: string;
  deadlineAt: number;
  done: boolean;
}

function deadlines() {
  const expired: string[] = [];
  const kept = new CallDeadlines<Call>((call) => expired.push(call.name));
  const add = (name: string, ms: number): Call => {
    const call = { name, deadlineAt: performance.now() + ms, done: false };
    kept.add(call);
    return call;
  };
  const settle = (call: Call) => {
    call.done = true;
    kept.settled();
  };
  return { kept, add, settle, expired };
}

describe("the quota client's call deadlines, on one timer", () => {
  it('each waiting call expires at its own deadline, not before; a settled one never', async () => {
    const { add, settle, expired } = deadlines();
    add('a', 10);
    const b = add('b', 10);
    await vi.advanceTimersByTimeAsync(5);
    add('c', 10);
    settle(b);
    await vi.advanceTimersByTimeAsync(4);
    expect(expired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(expired).toEqual(['a']);
    await vi.advanceTimersByTimeAsync(4);
    expect(expired).toEqual(['a']);
    await vi.advanceTimersByTimeAsync(1);
    expect(expired).toEqual(['a', 'c']);
  });

  it('a call added with an earlier deadline than those waiting expires at its own', async () => {
    const { add, expired } = deadlines();
    add('slow', 100);
    add('fast', 10);
    await vi.advanceTimersByTimeAsync(10);
    expect(expired).toEqual(['fast']);
    await vi.advanceTimersByTimeAsync(90);
    expect(expired).toEqual(['fast', 'slow']);
  });

  it('calls with deadlines in any order expire each at its own, in deadline order', async () => {
    const { add, expired } = deadlines();
    add('30', 30);
    add('10', 10);
    add('40', 40);
    add('20', 20);
    add('10 again', 10);
    for (const [at, seen] of [
      [10, ['10', '10 again']],
      [20, ['10', '10 again', '20']],
      [30, ['10', '10 again', '20', '30']],
      [40, ['10', '10 again', '20', '30', '40']],
    ] as const) {
      await vi.advanceTimersByTimeAsync(at - 1 - performance.now());
      expect(expired).toHaveLength(seen.length - (at === 10 ? 2 : 1));
      await vi.advanceTimersByTimeAsync(1);
      expect(expired).toEqual(seen);
    }
  });

  it('calls settled one after another leave at once, on about one timer per deadline rather than one per call', async () => {
    const { kept, add, settle, expired } = deadlines();
    const timers = vi.spyOn(globalThis, 'setTimeout');
    for (let i = 0; i < 100; i++) {
      settle(add(`call ${i}`, 10));
      await vi.advanceTimersByTimeAsync(1);
    }
    expect(kept.size).toBe(0);
    expect(expired).toEqual([]);
    expect(timers.mock.calls.length).toBeLessThanOrEqual(12);
  });
});
