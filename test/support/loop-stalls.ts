/**
 * How long this process could not run while something was timed: a chain of
 * short timers, each firing late by the time the event loop was held (a
 * busy loop, a starved CPU on a shared machine). A deadline here does not
 * hold that time against the store (src/engine/deadline.ts), so a test that
 * times an answer against a budget allows for it.
 */
export function watchStalls(stepMs = 5): { stop(): number } {
  let late = 0;
  let due = performance.now() + stepMs;
  let timer = setTimeout(function tick() {
    const now = performance.now();
    late += Math.max(0, now - due);
    due = now + stepMs;
    timer = setTimeout(tick, stepMs);
  }, stepMs);
  return {
    stop() {
      clearTimeout(timer);
      return late + Math.max(0, performance.now() - due);
    },
  };
}
