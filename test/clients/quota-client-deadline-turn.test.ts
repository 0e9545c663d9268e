import type { AllowRequest, AllowResponse } from '@quota-service/contract';
import { describe, expect, it } from 'vitest';
import { DeadlineExceeded } from '../../clients/quota-client/src/call-deadline.js';
import { expire, finish, type Pending } from '../../clients/quota-client/src/pending-call.js';

const REQUEST = { policy: 'orders', identity: { user: '1' }, cost: 1, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 } as AllowRequest;
const ANSWER = { allowed: true } as AllowResponse;

function pending(): { item: Pending; settled: Promise<string> } {
  let item!: Pending;
  const settled = new Promise<string>((resolve) => {
    item = {
      request: REQUEST,
      resolve: () => resolve('answered'),
      reject: (error) => resolve(error instanceof DeadlineExceeded ? 'deadline exceeded' : `failed: ${String(error)}`),
      signal: undefined,
      deadlines: undefined,
      deadlineAt: performance.now(),
      done: false,
      rpc: undefined,
    };
  });
  return { item, settled };
}

describe("a call's deadline and its answer in the same turn of the event loop", () => {
  it('the answer read after the deadline timer, in the same turn, wins: the call is answered, not given up', async () => {
    const { item, settled } = pending();
    // Timers run before the poll phase: the deadline fires first, then the answer that was already there is read.
    expire(item);
    if (finish(item)) item.resolve(ANSWER);
    expect(await settled).toBe('answered');
  });

  it('with no answer by the end of that turn, the call gives up with DeadlineExceeded', async () => {
    const { item, settled } = pending();
    expire(item);
    expect(await settled).toBe('deadline exceeded');
    // An answer in a later turn is too late: ignored.
    expect(finish(item)).toBe(false);
  });
});
