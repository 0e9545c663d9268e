// The bars of `make soak` (bench/soak/verdict.ts), judged from made-up samples:
// a steady run passes each bar, and each kind of leak fails its own bar.
import { describe, expect, it } from 'vitest';
import { judgeSoak, type Sample, type SoakRun } from '../../bench/soak/verdict.js';

const MiB = 2 ** 20;

/** 10 minutes of load sampled every 5 s, then 70 s idle while the keys expire; `change` alters each sample. */
function run(change: (sample: Sample, i: number) => Partial<Sample> = () => ({}), extra: Partial<SoakRun> = {}): SoakRun {
  const samples: Sample[] = [];
  for (let i = 0; i <= 120; i++) {
    const atMs = i * 5_000;
    // Steady state: the fixed keys and the remembered decisions of the last 30 s.
    const base: Sample = {
      atMs,
      phase: 'load',
      decisions: atMs,
      sent: atMs + 300,
      stale: 0.02,
      rssBytes: (140 + (i % 7) * 3) * MiB,
      fds: 31 + (i % 2),
      keys: 10_200 + Math.min(atMs, 30_000),
      keysWithoutTtl: 0,
    };
    samples.push({ ...base, ...change(base, i) });
  }
  for (let i = 1; i <= 14; i++) {
    const base: Sample = {
      atMs: 600_000 + i * 5_000,
      phase: 'idle',
      decisions: 600_000,
      sent: 600_300,
      stale: 0.02,
      rssBytes: 150 * MiB,
      fds: 31,
      keys: Math.max(0, 40_200 - i * 4_000),
      keysWithoutTtl: 0,
    };
    samples.push({ ...base, ...change(base, 120 + i) });
  }
  return {
    samples,
    warmupMs: 120_000,
    fixedKeys: 10_200,
    memoWindowMs: 35_000,
    staleShare: 0.1,
    longestTtlMs: 60_000,
    idleGraceMs: 30_000,
    errors: 0,
    errorLines: 0,
    exitCode: 0,
    ...extra,
  };
}

const failed = (soak: SoakRun) =>
  judgeSoak(soak)
    .filter((bar) => !bar.pass)
    .map((bar) => bar.name);

describe('the soak verdict', () => {
  it('passes a steady run, with its figures', () => {
    const bars = judgeSoak(run());
    expect(bars.map((bar) => [bar.name, bar.pass])).toEqual([
      ['errors', true],
      ['RSS', true],
      ['fds', true],
      ['keys', true],
      ['idle', true],
    ]);
    expect(bars[1]!.detail).toMatch(
      /^after warm-up 140-158 MiB \(median 149\); last third against the first: floor \+0\.0%, median [+-]\d\.\d% \(bar: \+10% for both\); least-squares trend [+-]0\.\d MiB\/min; at rest 140 MiB before the load, 150 MiB at the end of idle$/,
    );
    expect(bars[4]!.detail).toBe('keys 0 55 s after the load stopped (longest TTL at the end of the load 60.0 s, bar: it + 30 s)');
  });

  it('fails RSS that keeps growing after warm-up, though it was flat before', () => {
    // +1 MiB a sample after warm-up (24 samples in): 140 MiB on, about 48% more by the end.
    expect(failed(run((s, i) => (s.phase === 'load' && i > 24 ? { rssBytes: (140 + (i - 24)) * MiB } : {})))).toEqual(['RSS']);
  });

  it('judges the floor of the sawtooth a collecting heap makes, not where the run ends in it', () => {
    // The heap grows 4 MiB a sample to 161 MiB, a collection drops it to 117 MiB; the run ends near a peak.
    const sawtooth = (i: number) => (117 + ((i * 4) % 48)) * MiB;
    expect(failed(run((s, i) => (s.phase === 'load' ? { rssBytes: sawtooth(i) } : {})))).toEqual([]);
    // The same, with the floor rising 3 MiB a minute (a leak): from 123 MiB after warm-up to 139 in the last third.
    expect(failed(run((s, i) => (s.phase === 'load' ? { rssBytes: sawtooth(i) + (i / 12) * 3 * MiB } : {})))).toEqual(['RSS']);
  });

  it('passes a floor that rises while the band does not: freed pages V8 has not returned yet', () => {
    // 150-158 MiB, but for 50 s in the first third after warm-up when it fell to 136 MiB (the shape of a run on this machine).
    expect(failed(run((s, i) => (s.phase === 'load' ? { rssBytes: (i >= 30 && i < 40 ? 136 + (i % 3) : 150 + (i % 9)) * MiB } : {})))).toEqual([]);
  });

  it('ignores growth during warm-up', () => {
    expect(failed(run((_s, i) => (i < 24 ? { rssBytes: (60 + i * 3) * MiB } : {})))).toEqual([]);
  });

  it('fails a descriptor leak: one more open every minute', () => {
    expect(failed(run((s, i) => (s.phase === 'load' ? { fds: 31 + Math.floor(i / 12) } : {})))).toEqual(['fds']);
  });

  it('fails keys above what the TTLs allow, and a key without a TTL', () => {
    // Redis may keep up to 10% of the keys expired but not deleted yet: within the bound.
    expect(failed(run((s) => (s.phase === 'load' ? { keys: Math.floor((10_200 + Math.min(s.atMs, 30_000)) * 1.1) } : {})))).toEqual([]);
    // More expired keys than 10%, when Redis says so (its expiry cycle starved of CPU): within the bound.
    const starved = (s: Sample) => (s.phase === 'load' ? { keys: Math.floor((10_200 + Math.min(s.atMs, 30_000)) * 1.25), stale: 0.2 } : {});
    expect(failed(run(starved))).toEqual([]);
    expect(failed(run((s) => ({ ...starved(s), stale: 0.02 })))).toEqual(['keys']);
    // Remembered decisions that outlive their TTL: 45 s of them instead of 30 s.
    expect(failed(run((s) => (s.phase === 'load' ? { keys: 10_200 + Math.min(s.atMs, 45_000) } : {})))).toEqual(['keys']);
    expect(failed(run((_s, i) => (i === 50 ? { keysWithoutTtl: 1 } : {})))).toEqual(['keys']);
  });

  it('fails keys that never reach zero once idle, or reach it after the longest TTL and the grace', () => {
    expect(failed(run((s) => (s.phase === 'idle' ? { keys: Math.max(10, s.keys) } : {})))).toEqual(['idle']);
    expect(failed(run(undefined, { longestTtlMs: 20_000 }))).toEqual(['idle']);
  });

  it('fails on a failed call, an error line in the service log, or an unclean exit', () => {
    expect(failed(run(undefined, { errors: 1 }))).toEqual(['errors']);
    expect(failed(run(undefined, { errorLines: 1 }))).toEqual(['errors']);
    expect(failed(run(undefined, { exitCode: undefined }))).toEqual(['errors']);
  });
});
