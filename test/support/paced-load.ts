/**
 * Load at a steady pace: one worker per (policy, user), each sending its next
 * call every `intervalMs` (or at once, when the last answer came later), one
 * at a time. One call at a time per user keeps each user's answers in the
 * order the store saw them, which a reference model can replay
 * (test/support/decision-audit.ts); the pace keeps the load the same whether
 * answers are fast or slow, as a real caller's would be.
 */
export interface PacedCall<R> {
  readonly policy: string;
  readonly user: string;
  /** performance.now() when it was sent and when it settled. */
  readonly startedAt: number;
  endedAt: number;
  response?: R;
  error?: unknown;
}

export interface PacedLoad<R> {
  /** Every call so far, settled or not, in the order they were sent. */
  readonly calls: readonly PacedCall<R>[];
  /** Stops sending; resolves once every call in flight has settled. */
  stop(): Promise<void>;
}

export interface PacedLoadOptions<R> {
  readonly policies: readonly string[];
  readonly users: readonly string[];
  readonly intervalMs: number;
  readonly call: (policy: string, user: string) => Promise<R>;
}

export function startPacedLoad<R>(options: PacedLoadOptions<R>): PacedLoad<R> {
  const calls: PacedCall<R>[] = [];
  let running = true;
  let wake: Array<() => void> = [];
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = wake.filter((w) => w !== done);
        resolve();
      }
      wake.push(done);
    });
  const worker = async (policy: string, user: string, offset: number) => {
    // Spread the workers over the interval rather than all at once.
    await pause(offset);
    let next = performance.now();
    while (running) {
      const call: PacedCall<R> = { policy, user, startedAt: performance.now(), endedAt: Number.NaN };
      calls.push(call);
      try {
        call.response = await options.call(policy, user);
      } catch (error) {
        call.error = error;
      }
      call.endedAt = performance.now();
      next += options.intervalMs;
      const now = performance.now();
      if (next < now) next = now;
      else await pause(next - now);
    }
  };
  const pairs = options.policies.flatMap((policy) => options.users.map((user) => [policy, user] as const));
  const workers = pairs.map(([policy, user], i) => worker(policy, user, (i * options.intervalMs) / pairs.length));
  return {
    calls,
    async stop() {
      running = false;
      for (const w of [...wake]) w();
      await Promise.all(workers);
    },
  };
}
