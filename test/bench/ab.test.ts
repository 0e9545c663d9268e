// The A/B bench's own parts (bench/ab/): the table that sets two revisions'
// samples side by side, and the node_modules a built revision runs with (and
// the note when it locks other packages). No measuring here: the samples are
// made up, so every expected figure is known.
import { lstat, mkdir, mkdtemp, readlink, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Comparison, signTest } from '../../bench/ab/compare.js';
import { overlayNodeModules, warnOfOtherPackages } from '../../bench/ab/revision.js';
import { visitOrder } from '../../bench/ab/scenarios.js';

describe('A/B comparison table', () => {
  it('gives each metric the median of each side, B / A of the medians, and the ratio of each back-to-back pair', () => {
    const comparison = new Comparison();
    for (const value of [100, 300, 200]) comparison.add('decisions/s', true, 'a', value);
    for (const value of [250, 150, 220]) comparison.add('decisions/s', true, 'b', value);
    comparison.add('p50 ms', false, 'a', 0.2);
    comparison.add('p50 ms', false, 'b', 0.25);
    expect(comparison.table('A old', 'B new').split('\n')).toEqual([
      '| metric | A old | B new | B / A | pairs: B / A (lowest–highest) | verdict | samples A | samples B |',
      '|---|---:|---:|---:|---:|---|---|---|',
      // Pairs 250 / 100, 150 / 300, 220 / 200: 2.5, 0.5, 1.1; two favour B, one A.
      '| decisions/s | 200 | 220 | 1.100 | 1.100 (0.50–2.50) | unclear (2 of 3 pairs favour B, p = 1.0) | 100 300 200 | 250 150 220 |',
      '| p50 ms | 0.2 | 0.25 | 1.250 | 1.250 (1.25–1.25) | unclear (0 of 1 pairs favour B, p = 1.0) | 0.2 | 0.25 |',
    ]);
  });

  it('names a side only when the pairs favour it beyond chance, by the metric’s direction', () => {
    const comparison = new Comparison();
    for (const [a, b] of [1000, 1200, 900, 1100, 1000, 950].map((a, i) => [a, a + 10 * (i + 1)])) {
      comparison.add('decisions/s', true, 'a', a!);
      comparison.add('decisions/s', true, 'b', b!);
      comparison.add('latency ms', false, 'a', a! / 1000);
      comparison.add('latency ms', false, 'b', b! / 1000);
    }
    // One pair in six the other way, one tie in seven: not beyond chance.
    for (const value of [5, 6, 5, 6, 5, 6, 7]) comparison.add('CPU µs', false, 'a', value);
    for (const value of [6, 5, 4, 5, 4, 5, 7]) comparison.add('CPU µs', false, 'b', value);
    const verdicts = comparison
      .table('A', 'B')
      .split('\n')
      .slice(2)
      .map((row) => row.split(' | ')[5]);
    expect(verdicts).toEqual([
      'B better (6 of 6 pairs favour B, p = 0.031)',
      'B worse (0 of 6 pairs favour B, p = 0.031)',
      'unclear (5 of 6 pairs favour B, p = 0.22)',
    ]);
  });

  it('says n/a for a figure one side does not report (a revision older than it), not NaN', () => {
    const comparison = new Comparison();
    for (const value of [26_000, 25_000]) comparison.add('heap bytes/decision', false, 'b', value);
    expect(comparison.table('A', 'B').split('\n')[2]).toBe(
      '| heap bytes/decision | n/a | 25500 | n/a | n/a | unclear (0 of 0 pairs favour B, p = 1.0) |  | 26000 25000 |',
    );
  });

  it('takes a sign test’s p-value as the chance of a split at least as uneven, both ways', () => {
    expect(signTest(0, 0)).toBe(1);
    expect(signTest(3, 3)).toBe(1);
    expect(signTest(5, 0)).toBeCloseTo(2 / 32, 12);
    expect(signTest(0, 6)).toBeCloseTo(2 / 64, 12);
    // 1 + 9 + 36 ways of at most 2 of 9: 2 * 46 / 512.
    expect(signTest(7, 2)).toBeCloseTo(92 / 512, 12);
  });
});

describe('the order a step visits the pairs in', () => {
  const pairs = [
    ['a0', 'b0'],
    ['a1', 'b1'],
  ] as const;

  it('goes pair by pair, A first and B first in turn (A B B A), flipping with each step and round', () => {
    expect(visitOrder(pairs, 0, 0)).toEqual(['a0', 'b0', 'b1', 'a1']);
    expect(visitOrder(pairs, 0, 1)).toEqual(['b0', 'a0', 'a1', 'b1']);
    expect(visitOrder(pairs, 1, 0)).toEqual(['b0', 'a0', 'a1', 'b1']);
    expect(visitOrder(pairs, 1, 1)).toEqual(['a0', 'b0', 'b1', 'a1']);
  });

  it('lets neither side go first more often, over any number of rounds with pairs in an even number', () => {
    for (const rounds of [1, 2, 3]) {
      let aFirst = 0;
      for (let round = 0; round < rounds; round++) {
        const order = visitOrder(pairs, round, 0);
        for (let i = 0; i < order.length; i += 2) if (order[i]!.startsWith('a')) aFirst++;
      }
      expect(aFirst).toBe(rounds);
    }
  });
});

describe('a built revision’s node_modules', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('links every installed package but the @quota-service ones, which are the revision’s own', async () => {
    dir = await mkdtemp(join(tmpdir(), 'ab-overlay-'));
    const installed = join(dir, 'installed');
    for (const name of ['ioredis', '@grpc', '@quota-service/client', '@quota-service/core']) await mkdir(join(installed, name), { recursive: true });
    const revisionClient = join(dir, 'revision', 'clients', 'quota-client');
    await mkdir(revisionClient, { recursive: true });
    const target = join(dir, 'revision', 'node_modules');

    await overlayNodeModules(installed, target, new Map([['@quota-service/client', revisionClient]]));

    expect(await readlink(join(target, 'ioredis'))).toBe(join(installed, 'ioredis'));
    expect(await readlink(join(target, '@grpc'))).toBe(join(installed, '@grpc'));
    expect(await realpath(join(target, '@quota-service', 'client'))).toBe(await realpath(revisionClient));
    // The checkout's packages never leak in: @quota-service is a folder of the revision's links, not the installed one.
    expect((await lstat(join(target, '@quota-service'))).isSymbolicLink()).toBe(false);
    await expect(lstat(join(target, '@quota-service', 'core'))).rejects.toThrow(/ENOENT/);
  });

  it('says so when the revision locks other package versions than the checkout it runs with', async () => {
    dir = await mkdtemp(join(tmpdir(), 'ab-lock-'));
    const [checkout, same, other] = ['checkout', 'same', 'other'].map((name) => join(dir!, name));
    for (const [at, lock] of [
      [checkout, '{"lockfileVersion":3,"packages":{"node_modules/ioredis":{"version":"6.0.0"}}}'],
      [same, '{"lockfileVersion":3,"packages":{"node_modules/ioredis":{"version":"6.0.0"}}}'],
      [other, '{"lockfileVersion":3,"packages":{"node_modules/ioredis":{"version":"5.4.1"}}}'],
    ] as const) {
      await mkdir(at!, { recursive: true });
      await writeFile(join(at!, 'package-lock.json'), lock);
    }
    const heard: string[] = [];
    await warnOfOtherPackages(checkout!, { name: 'HEAD', commit: 'c1', dir: same! }, (line) => heard.push(line));
    expect(heard).toEqual([]);
    await warnOfOtherPackages(checkout!, { name: 'HEAD~3', commit: 'c2', dir: other! }, (line) => heard.push(line));
    expect(heard).toEqual(["note: the package-lock.json of HEAD~3 differs from this checkout's; it runs with the packages this checkout installed"]);
  });
});
