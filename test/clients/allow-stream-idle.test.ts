import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AllowStreamRequest } from '@quota-service/contract';
import { AllowStream } from '../../clients/quota-client/src/allow-stream.js';
import type { StreamEvents } from '../../clients/quota-client/src/stream-call.js';

/**
 * When an idle AllowStream ends, on a virtual clock: the call is a recorder
 * (what AllowStream sent and whether it ended), answered by the test.
 */
beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

function recordedStream(idleMs: number) {
  const sent: AllowStreamRequest[] = [];
  let events: StreamEvents | undefined;
  let ended = false;
  const stream = new AllowStream(
    (given) => {
      events = given;
      return { send: (message) => sent.push(message), end: () => (ended = true), cancel: () => (ended = true) };
    },
    { idleMs },
  );
  /** Sends one batch and answers it at once. */
  const batch = () => {
    const id = stream.send({ requests: [], resolve: () => {}, reject: () => {} });
    events!.answer({ id, results: [] });
  };
  return { stream, batch, ended: () => ended, sent };
}

describe('an idle AllowStream', () => {
  it('ends once nobody has waited for idleMs, counted from the last answer', async () => {
    const { batch, ended } = recordedStream(30);
    batch();
    await vi.advanceTimersByTimeAsync(29);
    expect(ended()).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(ended()).toBe(true);
  });

  it('kept busy, it stays open past idleMs, and ends idleMs after its last batch', async () => {
    const { stream, batch, ended, sent } = recordedStream(30);
    for (let i = 0; i < 10; i++) {
      batch();
      await vi.advanceTimersByTimeAsync(10);
    }
    expect(sent).toHaveLength(10);
    expect(ended()).toBe(false);
    expect(stream.usable).toBe(true);
    // The last batch was answered 10 ms ago.
    await vi.advanceTimersByTimeAsync(19);
    expect(ended()).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(ended()).toBe(true);
    expect(stream.usable).toBe(false);
  });

  it('a batch still waiting when the idle time would be up keeps it open', async () => {
    const { stream, batch, ended } = recordedStream(30);
    batch();
    await vi.advanceTimersByTimeAsync(20);
    stream.send({ requests: [], resolve: () => {}, reject: () => {} });
    await vi.advanceTimersByTimeAsync(100);
    expect(ended()).toBe(false);
  });
});
