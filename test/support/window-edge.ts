/**
 * Waits, when the wall clock is within `marginMs` of the end of a minute, for
 * the next minute to begin: calls a test makes at once then all fall in one
 * per-minute fixed window (whose edges are the Unix epoch's minutes, on
 * Redis's clock, which is this machine's), instead of a share of them
 * counting again in the next window. Returns at once otherwise.
 */
export async function awayFromMinuteEnd(marginMs = 10_000): Promise<void> {
  const intoMinute = Date.now() % 60_000;
  if (intoMinute > 60_000 - marginMs) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 100));
}
