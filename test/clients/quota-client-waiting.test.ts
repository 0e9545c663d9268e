import { describe, expect, it } from 'vitest';
import { waitAtMost } from '../../clients/quota-client/src/waiting.js';

/** How the quota client waits for a slice on its way: never past the call's deadline, never past its caller's abort. */
describe('waitAtMost', () => {
  it('resolves when the promise settles, fulfilled or rejected', async () => {
    expect(await waitAtMost(Promise.resolve('x'), 10_000)).toBeLessThan(1_000);
    expect(await waitAtMost(Promise.reject(new Error('take failed')), 10_000)).toBeLessThan(1_000);
  });

  it('a promise that never settles: resolves after the time it was given, with the time waited', async () => {
    const waited = await waitAtMost(new Promise(() => {}), 30);
    expect(waited).toBeGreaterThanOrEqual(29);
  });

  it("the caller's abort ends the wait, also one aborted already", async () => {
    const controller = new AbortController();
    const waiting = waitAtMost(new Promise(() => {}), 10_000, controller.signal);
    controller.abort();
    expect(await waiting).toBeLessThan(1_000);
    expect(await waitAtMost(new Promise(() => {}), 10_000, controller.signal)).toBe(0);
  });
});
