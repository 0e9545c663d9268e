import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeIdentityValue, identityKey } from '@quota-service/core';

/** The hash tag Redis Cluster hashes: from the first '{' to the first '}' after it. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  const close = key.indexOf('}', open + 1);
  return key.slice(open + 1, close);
}

describe('state keys', () => {
  it('is rl:v1:<limit>:<key_by>:{<identity>} for the orders bucket', () => {
    expect(identityKey('orders', 'user', '42')).toBe('rl:v1:orders:user:{42}');
  });

  it('crafted identities cannot collide', () => {
    const crafted = ['a:b', 'a', 'b', 'a%3Ab', 'a%3ab', '{x}', 'x', '}x{', '{', '}', '%', '%25', 'a b', 'a+b', 'ａ:b', 'а:b', 'e\u0301', 'é'];
    const keys = crafted.map((id) => identityKey('orders', 'user', id));
    expect(new Set(keys).size).toBe(crafted.length);
  });

  it('every identity stays inside one hash tag and round-trips (so it is injective)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 40 }), (a, b) => {
        for (const id of [a, b]) {
          const key = identityKey('orders', 'user', id);
          expect(key.startsWith('rl:v1:orders:user:{')).toBe(true);
          expect(key.endsWith('}')).toBe(true);
          expect(decodeURIComponent(hashTag(key))).toBe(id);
          expect(key.slice(0, -1)).not.toMatch(/[\u0000-\u001f\u007f]/);
        }
        if (a !== b && b.isWellFormed()) expect(identityKey('orders', 'user', a)).not.toBe(identityKey('orders', 'user', b));
      }),
    );
  });

  it('encodes an identity exactly as encodeURIComponent does (the unescaped fast path included)', () => {
    const ascii = fc.integer({ min: 0, max: 127 }).map((code) => String.fromCharCode(code));
    fc.assert(
      fc.property(fc.string({ unit: ascii, maxLength: 12 }), fc.string({ unit: 'grapheme', maxLength: 12 }), (a, b) => {
        for (const id of [a, b, `${a}${b}`]) expect(encodeIdentityValue(id)).toBe(encodeURIComponent(id));
      }),
      { numRuns: 2_000 },
    );
    // Every ASCII character on its own, so none is left to chance.
    for (let code = 0; code < 128; code++) {
      const id = String.fromCharCode(code);
      expect(encodeIdentityValue(id)).toBe(encodeURIComponent(id));
    }
  });
});
