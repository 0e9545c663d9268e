/** Resolves on the next turn of the event loop, after the I/O that is ready has been read. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Waits for `promise` to settle, at most `ms` and no longer than `signal`
 * lets it; resolves with the milliseconds waited, never rejects.
 */
export function waitAtMost(promise: Promise<unknown>, ms: number, signal?: AbortSignal): Promise<number> {
  const start = performance.now();
  if (signal?.aborted) return Promise.resolve(0);
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve(performance.now() - start);
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    promise.then(done, done);
  });
}
