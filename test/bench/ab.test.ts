// The A/B bench's own parts (bench/ab/): the table that sets two revisions'
// samples side by side, and the node_modules a built revision runs with. No
// measuring here: the samples are made up, so every expected figure is known.
import { lstat, mkdir, mkdtemp, readlink, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Comparison } from '../../bench/ab/compare.js';
import { overlayNodeModules } from '../../bench/ab/revision.js';

describe('A/B comparison table', () => {
  it('gives each metric the median of each side, B / A, and says which side the ratio favours by the metric’s direction', () => {
    const comparison = new Comparison();
    for (const value of [100, 300, 200]) comparison.add('decisions/s', true, 'a', value);
    for (const value of [250, 150]) comparison.add('decisions/s', true, 'b', value);
    for (const value of [10, 12]) comparison.add('CPU µs/decision', false, 'a', value);
    for (const value of [11, 11]) comparison.add('CPU µs/decision', false, 'b', value);
    comparison.add('p50 ms', false, 'a', 0.2);
    comparison.add('p50 ms', false, 'b', 0.25);
    expect(comparison.table('A old', 'B new').split('\n')).toEqual([
      '| metric | A old | B new | B / A | samples A | samples B |',
      '|---|---:|---:|---:|---|---|',
      '| decisions/s | 200 | 200 | 1.000 | 100 300 200 | 250 150 |',
      '| CPU µs/decision | 11 | 11 | 1.000 | 10 12 | 11 11 |',
      '| p50 ms | 0.2 | 0.25 | 1.250 (B worse) | 0.2 | 0.25 |',
    ]);
  });

  it('says B is better when more is better and B has more, or less is better and B has less', () => {
    const comparison = new Comparison();
    comparison.add('decisions/s', true, 'a', 1000);
    comparison.add('decisions/s', true, 'b', 1500);
    comparison.add('latency ms', false, 'a', 2);
    comparison.add('latency ms', false, 'b', 1);
    const rows = comparison.table('A', 'B').split('\n').slice(2);
    expect(rows).toEqual(['| decisions/s | 1000 | 1500 | 1.500 (B better) | 1000 | 1500 |', '| latency ms | 2 | 1 | 0.500 (B better) | 2 | 1 |']);
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
});
