import { Readable } from 'node:stream';
import { AllowStreamRequest, AllowStreamResponse } from '@quota-service/contract';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestService, type TestService } from '../support/quota-service.js';
import { connectRawGrpc } from '../support/raw-grpc-stream.js';
import { memoryFixture } from '../support/store-fixtures.js';

// The lean path reads AllowStream off the HTTP/2 stream (src/grpc/raw-stream.ts) and pauses it
// only while decoded messages wait for the handler (HTTP/2 flow control then holds the caller
// back: test/grpc/allow-stream-flow-control.test.ts). A caller with one batch in flight has each
// taken at once: its stream is not paused and resumed for every message.

let service: TestService;
beforeAll(async () => {
  service = await startTestService(memoryFixture().store);
});
afterAll(() => service.stop());

const batch = (id: number) =>
  AllowStreamRequest.encode({
    id,
    requests: [{ policy: 'orders', identity: { user: `paced-${id}` }, cost: 1, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 }],
  }).finish();

describe('the lean AllowStream with one batch in flight', () => {
  it('leaves the stream flowing: no pause per message', async () => {
    const pause = vi.spyOn(Readable.prototype, 'pause');
    const serverPauses = () => pause.mock.contexts.filter((stream) => stream?.constructor.name === 'ServerHttp2Stream').length;
    const connection = connectRawGrpc(`127.0.0.1:${service.server.port}`);
    try {
      const call = connection.open('/quota.v1.QuotaService/AllowStream');
      let answered: (id: number) => void = () => {};
      const reading = call.read((bytes) => answered(AllowStreamResponse.decode(bytes).id));
      const batches = 20;
      for (let id = 1; id <= batches; id++) {
        const answer = new Promise<number>((resolve) => (answered = resolve));
        call.send(batch(id));
        expect(await answer).toBe(id);
      }
      call.end();
      await reading;
      // Once as the call opens (nothing is read before the handler asks), then never.
      expect(serverPauses()).toBe(1);
    } finally {
      pause.mockRestore();
      connection.close();
    }
  });
});
