// The CPU breakdown's per-decision counts of a Node process (bench/process-counters.ts):
// bytes allocated on the JavaScript heap across garbage collections, and event-loop
// turns, in this process and asked of a server child over its stdin.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { countersPer, parseCounters, readCounters } from '../../bench/process-counters.js';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('process counters', () => {
  it('count the bytes allocated on the heap across the collections in between, not only what is still live', () => {
    const arrays = 800;
    const payload = arrays * 10_000 * 8; // 64 MB of doubles: several young-generation collections
    const live: number[][] = [];
    const before = readCounters();
    for (let i = 0; i < arrays; i++) {
      live.push(new Array<number>(10_000).fill(1.5));
      if (live.length > 4) live.shift();
    }
    const allocated = readCounters().allocatedBytes - before.allocatedBytes;
    expect(live).toHaveLength(4);
    expect(allocated).toBeGreaterThanOrEqual(payload);
    expect(allocated).toBeLessThan(2.5 * payload);
  });

  it('count the turns of the event loop', async () => {
    const before = readCounters();
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setTimeout(resolve, 1));
    // At least one turn per timer; the test runner's own messages add more.
    expect(readCounters().loops - before.loops).toBeGreaterThanOrEqual(20);
  });

  it('divide by the decisions in between', () => {
    expect(countersPer({ loops: 10, allocatedBytes: 1_000 }, { loops: 30, allocatedBytes: 41_000 }, 20)).toEqual({ loops: 1, allocatedBytes: 2_000 });
  });

  it('a server child answers a `counters` line on its stdin with its own counts (bench/servers/lifecycle.ts)', async () => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '-e', "import('./bench/servers/lifecycle.ts').then((m) => m.serveUntilParentLeaves(1, async () => {}))"],
      { cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'inherit'] },
    );
    let stdout = '';
    const lines = (count: number) =>
      new Promise<string[]>((resolve) => {
        const check = () => {
          const done = stdout.split('\n').filter((line) => line !== '');
          if (done.length >= count) resolve(done);
        };
        child.stdout.on('data', (chunk: Buffer) => {
          stdout += chunk.toString();
          check();
        });
        check();
      });
    expect((await lines(1))[0]).toBe('port=1');
    // Each asked once the answer before it is in: a turn of the child's loop or more apart.
    const answers = [];
    for (let i = 1; i <= 3; i++) {
      child.stdin.write('counters\n');
      answers.push(parseCounters((await lines(i + 1))[i]!));
    }
    child.stdin.end();
    await new Promise((resolve) => child.once('exit', resolve));
    const [first, , third] = answers;
    expect(first?.loops).toBeGreaterThan(0);
    expect(third!.loops).toBeGreaterThan(first!.loops);
    expect(third!.allocatedBytes).toBeGreaterThan(first!.allocatedBytes);
  });
});
