// Tiny assertions for the consumer: it depends on nothing but the packages under test and their peers.

/** A failed check: main.mjs prints its message and exits 1. */
export class CheckFailed extends Error {}

export function check(condition, message) {
  if (!condition) throw new CheckFailed(message);
}

const REFILL_MS = 500;
const ATTEMPTS = 3;

/**
 * Runs `attempt(user)` on a fresh user until the 11th request of a burst is denied.
 * Policy `orders` is a bucket of 10 refilling 2/s, so the 11th request is denied only
 * when it is decided within 0.5 s of the first. `attempt` returns 'denied' (checked) or
 * 'admitted'; an admitted 11th counts as a failure unless the burst took long enough
 * for a token to come back (a loaded machine), in which case a new user tries again.
 */
export async function eleventhDenied(label, attempt) {
  for (let n = 1; n <= ATTEMPTS; n++) {
    const user = `pkg-${label}-${process.pid}-${Date.now()}-${n}`;
    const started = performance.now();
    const outcome = await attempt(user);
    const elapsed = performance.now() - started;
    if (outcome === 'denied') return;
    check(elapsed >= REFILL_MS, `${label}: the 11th request within ${Math.round(elapsed)} ms was admitted; policy orders allows 10`);
    console.error(`consumer: ${label}: burst took ${Math.round(elapsed)} ms, a token refilled; trying again with a new user`);
  }
  throw new CheckFailed(`${label}: every burst was too slow (${ATTEMPTS} attempts) to see the 11th request denied`);
}

/** Ten at once: all must be admitted (a fresh user's bucket holds 10). */
export const ten = (fn) => Promise.all(Array.from({ length: 10 }, (_, i) => fn(i + 1)));
