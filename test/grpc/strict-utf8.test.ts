// The server's request deserializer (src/grpc/strict-utf8.ts): a valid request
// is decoded once, exactly as the generated code decodes it; only a request
// with invalid UTF-8 is decoded again, with those strings (and only those)
// marked so that validation refuses them. test/grpc/invalid-utf8.test.ts
// checks what callers see over a real connection.
import type { BinaryReader } from '@bufbuild/protobuf/wire';
import { describe, expect, it } from 'vitest';
import { AllowBatchRequest, AllowRequest } from '@quota-service/contract';
import { strictUtf8Decode } from '../../src/grpc/strict-utf8.js';
import { encodeAllowBatchRequest, encodeAllowRequest, type RawAllowRequest } from '../support/raw-requests.js';

/** AllowRequest's codec, counting its top-level decodes. */
function countingAllowRequest() {
  const counter = { decodes: 0, decode: (input: BinaryReader | Uint8Array, length?: number) => (counter.decodes++, AllowRequest.decode(input, length)) };
  return counter;
}

const bytes = (...values: number[]) => new Uint8Array(values);

describe('strictUtf8Decode', () => {
  it('decodes a valid request once, to what the generated decode makes of it', () => {
    const requests: RawAllowRequest[] = [
      { policy: 'orders', identity: [['user', '42']], cost: 2, requestId: 'r-1' },
      {
        policy: 'orders',
        identity: [
          ['user', 'a\uFFFD'],
          ['tenant', 'ünïcödé 🚀'],
        ],
        requestId: 'récépissé',
      },
      { policy: 'orders', identity: [['user', '\uFEFFleading byte-order mark']] },
      { policy: 'orders', identity: [['user', 'é'.repeat(200)]] },
    ];
    for (const request of requests) {
      const counter = countingAllowRequest();
      const encoded = encodeAllowRequest(request);
      expect(strictUtf8Decode(counter)(encoded)).toEqual(AllowRequest.decode(encoded));
      expect(counter.decodes).toBe(1);
    }
  });

  it('decodes a request with invalid UTF-8 a second time, marking exactly the invalid strings, each distinct', () => {
    const counter = countingAllowRequest();
    const decoded = strictUtf8Decode(counter)(
      encodeAllowRequest({
        policy: 'orders',
        identity: [
          ['user', bytes(0x61, 0xff)],
          ['tenant', 'a\uFFFD'],
          ['ip', bytes(0x61, 0xfe)],
        ],
        requestId: bytes(0xe2, 0x82),
      }),
    );
    expect(counter.decodes).toBe(2);
    expect(decoded.policy).toBe('orders');
    expect(decoded.identity.tenant).toBe('a\uFFFD');
    const invalid = [decoded.identity.user!, decoded.identity.ip!, decoded.requestId];
    for (const value of invalid) expect(value.isWellFormed()).toBe(false);
    expect(new Set([...invalid, 'a\uFFFD']).size).toBe(4);
  });

  it('marks invalid strings inside repeated items (AllowBatch)', () => {
    const decoded = strictUtf8Decode(AllowBatchRequest)(
      encodeAllowBatchRequest([
        { policy: 'orders', identity: [['user', 'ok']] },
        { policy: bytes(0x6f, 0xff), identity: [[bytes(0xc0, 0x80), 'v']] },
      ]),
    );
    expect(decoded.requests[0]).toEqual({ policy: 'orders', identity: { user: 'ok' }, cost: 0, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 });
    expect(decoded.requests[1]!.policy.isWellFormed()).toBe(false);
    expect(Object.keys(decoded.requests[1]!.identity).map((name) => name.isWellFormed())).toEqual([false]);
  });

  it('a malformed message still fails to decode, without a second try', () => {
    const counter = countingAllowRequest();
    const truncated = encodeAllowRequest({ policy: 'orders', identity: [['user', '42']] }).subarray(0, 9);
    expect(() => strictUtf8Decode(counter)(truncated)).toThrow(RangeError);
    expect(counter.decodes).toBe(1);
  });
});
