import { describe, expect, it } from 'vitest';
import { CrashLoopGuard } from '../../src/workers/crash-loop-guard.js';

describe('the crash-loop guard of the worker restarts', () => {
  it('restarts up to the limit within the window, refuses the next', () => {
    let now = 0;
    const guard = new CrashLoopGuard(() => now, { restarts: 3, windowMs: 60_000 });
    expect([guard.exited(), guard.exited(), guard.exited()]).toEqual([true, true, true]);
    now = 59_999;
    expect(guard.exited()).toBe(false);
  });

  it('forgets exits older than the window', () => {
    let now = 0;
    const guard = new CrashLoopGuard(() => now, { restarts: 2, windowMs: 1_000 });
    expect(guard.exited()).toBe(true);
    now = 500;
    expect(guard.exited()).toBe(true);
    now = 1_000;
    // The first exit has left the window: two within it.
    expect(guard.exited()).toBe(true);
    now = 1_200;
    expect(guard.exited()).toBe(false);
    now = 10_000;
    expect(guard.exited()).toBe(true);
  });
});
