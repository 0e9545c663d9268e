import calculateSlot from 'cluster-key-slot';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { identityKey } from '@quota-service/core';
import { keySlot } from '../../src/store/redis/key-slot.js';
import { useRedisServer } from '../support/use-redis.js';

/**
 * keySlot reads a key's characters in place (src/store/redis/key-slot.ts). It must
 * answer what Redis answers (CLUSTER KEYSLOT, over the key's UTF-8 bytes),
 * for hash tags, empty tags, unmatched braces and non-ASCII text alike.
 */
const piece = fc.oneof(
  fc.constantFrom('{', '}', '{}', ':', 'rl:v1:', 'é', '\u{1F600}', '\uD800'),
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.string({ unit: 'grapheme' }),
);
const key = fc.array(piece, { maxLength: 8 }).map((parts) => parts.join(''));

/** Redis's keyHashSlot on the bytes ioredis sends, written plainly: the reference. */
function referenceSlot(text: string): number {
  const bytes = Buffer.from(text, 'utf8');
  let [start, end] = [0, bytes.length];
  const open = bytes.indexOf(0x7b);
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close !== -1 && close !== open + 1) [start, end] = [open + 1, close];
  }
  let crc = 0;
  for (let i = start; i < end; i++) {
    crc ^= bytes[i]! << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc & 0x3fff;
}

describe('keySlot', () => {
  it("equals Redis's hash slot of the UTF-8 bytes for any string", () => {
    fc.assert(
      fc.property(key, (k) => {
        expect(keySlot(k)).toBe(referenceSlot(k));
      }),
      { numRuns: 20_000 },
    );
  });

  it('equals cluster-key-slot (which ioredis routes by) for the service keys of any identity', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.constantFrom('user', 'tenant'), (value, part) => {
        const k = identityKey('orders', part, value);
        expect(keySlot(k)).toBe(calculateSlot(k));
      }),
      { numRuns: 5_000 },
    );
  });

  describe('against Redis', () => {
    const redis = useRedisServer({ args: ['--cluster-enabled', 'yes'] });
    it('equals CLUSTER KEYSLOT', async () => {
      const client = redis().client();
      for (const k of [...fc.sample(key, { numRuns: 300, seed: 19 }), '{}{a}', '{a}}', 'é{x}', '{\uD800}']) {
        expect(keySlot(k), JSON.stringify(k)).toBe(Number(await client.call('CLUSTER', 'KEYSLOT', k)));
      }
      client.disconnect();
    });
  });
});
