import type { AllowResponse, QuotaServiceClient } from '@quota-service/contract';
import { openAllowStream } from './allow-stream-probe.js';
import { recoveryMs, type Answer } from './fault-figures.js';
import { answerOf } from './fault-service.js';
import { startPacedLoad } from './paced-load.js';

/**
 * One fault, start to end, under steady load: healthy for `healthyMs`, then
 * `inject()`, `faultMs` later `heal()`, then load goes on until every policy
 * is decided by the store again (at most `recoveryLimitMs`) and `settleMs`
 * more, for the audit. Beside the paced unary calls, one AllowStream opened
 * before the fault sends a one-request batch every `streamEveryMs`: it must
 * answer every batch and end cleanly, however the fault went.
 */
export interface FaultPhaseOptions {
  readonly client: QuotaServiceClient;
  readonly policies: readonly string[];
  readonly users: readonly string[];
  readonly intervalMs: number;
  readonly healthyMs: number;
  readonly faultMs: number;
  inject(): void | Promise<void>;
  heal(): void | Promise<void>;
  readonly recoveryLimitMs: number;
  readonly settleMs: number;
  readonly streamEveryMs?: number;
}

export interface FaultPhase {
  readonly answers: readonly Answer[];
  /** performance.now() once inject() and heal() were done. */
  readonly faultAt: number;
  readonly healedAt: number;
  /** The AllowStream: batches sent, answered, and how it ended ('OK' or the status). */
  readonly stream: { readonly sent: number; readonly answered: number; readonly ended: string };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runFaultPhase(options: FaultPhaseOptions): Promise<FaultPhase> {
  const stream = openAllowStream(options.client);
  let sent = 0;
  const streamPolicy = options.policies[0]!;
  const streamTimer = setInterval(
    () =>
      stream.send(++sent, [{ policy: streamPolicy, identity: { user: `${options.users[0]}-stream` }, cost: 1, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 }]),
    options.streamEveryMs ?? 100,
  );
  const load = startPacedLoad<AllowResponse>({
    policies: options.policies,
    users: options.users,
    intervalMs: options.intervalMs,
    call: (policy, user) => options.client.allow({ policy, identity: { user } }),
  });
  try {
    await sleep(options.healthyMs);
    await options.inject();
    // Once the fault is in place (the proxy's runs in another process): calls made before may have gone through.
    const faultAt = performance.now();
    await sleep(options.faultMs);
    await options.heal();
    const healedAt = performance.now();
    const settled = () => load.calls.filter((c) => !Number.isNaN(c.endedAt)).map(answerOf);
    const recovered = () =>
      options.policies.every(
        (p) =>
          recoveryMs(
            settled().filter((a) => a.policy === p),
            healedAt,
          ) !== undefined,
      );
    while (!recovered() && performance.now() < healedAt + options.recoveryLimitMs) await sleep(50);
    await sleep(options.settleMs);
    await load.stop();
    clearInterval(streamTimer);
    stream.end();
    const ended = await stream.ended;
    return { answers: load.calls.map(answerOf), faultAt, healedAt, stream: { sent, answered: stream.answers.length, ended } };
  } finally {
    clearInterval(streamTimer);
    stream.end();
    await load.stop();
  }
}
