import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatMs } from '../../../clients/quotactl/src/output.js';

describe('formatMs', () => {
  it.each([
    [0, '0'],
    [250, '250 ms'],
    [1_540, '1.5 s'],
    [125_000, '2 min 5 s'],
    [119_600, '2 min'],
    [3_599_700, '1 h'],
    [85_126_000, '23 h 39 min'],
    [7_200_000, '2 h'],
  ])('%d ms: %s', (ms, text) => {
    expect(formatMs(ms)).toBe(text);
  });

  it('never writes 60 of a smaller unit, and reads back within half of its smallest unit', () => {
    fc.assert(
      fc.property(fc.integer({ min: 60_000, max: 400 * 86_400_000 }), (ms) => {
        const text = formatMs(ms);
        const match = /^(\d+) (min|h)(?: (\d+) (s|min))?$/.exec(text);
        expect(match, text).not.toBeNull();
        const [, whole, unit, rest] = match!;
        expect(Number(rest ?? 0)).toBeLessThan(60);
        const [bigMs, smallMs] = unit === 'h' ? [3_600_000, 60_000] : [60_000, 1_000];
        expect(Math.abs(Number(whole) * bigMs + Number(rest ?? 0) * smallMs - ms)).toBeLessThanOrEqual(smallMs / 2);
      }),
    );
  });
});
