import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { valueDigest } from '@quota-service/core';
import { DenialLog } from '../../src/engine/denial-log.js';
import { createLogger } from '../../src/logger.js';

/** A DenialLog writing into an array, on a clock the test moves. */
function denialLog(level = 'info') {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line !== '') lines.push(JSON.parse(line));
      done();
    },
  });
  const clock = { ms: 0 };
  return { log: new DenialLog(createLogger(level, sink), 10, () => clock.ms), lines, clock };
}

describe('DenialLog', () => {
  it('at most 10 lines per policy per second; the next line says how many were left out; policies apart', async () => {
    const { log, lines, clock } = denialLog();
    for (let i = 0; i < 25; i++) log.denied('Allow', 'orders', 'orders', 'store', { user: 'u1' });
    for (let i = 0; i < 3; i++) log.denied('AllowStream', 'search', 'search', 'local', { user: 'u2' });
    clock.ms = 999;
    log.denied('Allow', 'orders', 'orders', 'store', { user: 'u1' });
    clock.ms = 1_000;
    log.denied('ShouldRateLimit', 'orders', 'orders', 'fail_closed', { user: 'u1' });
    log.denied('Allow', 'orders', 'orders', 'store', { user: 'u1' });
    await new Promise((resolve) => setImmediate(resolve));
    const orders = lines.filter((l) => l.policy === 'orders');
    expect(orders).toHaveLength(12);
    expect(orders.slice(0, 10).every((l) => l.suppressed === undefined)).toBe(true);
    expect(orders[10]).toMatchObject({ door: 'ShouldRateLimit', source: 'fail_closed', suppressed: 16 });
    expect(orders[11]!.suppressed).toBeUndefined();
    expect(lines.filter((l) => l.policy === 'search')).toHaveLength(3);
    expect(orders[0]).toEqual({
      level: 30,
      time: orders[0]!.time,
      service: 'quota-service',
      policy: 'orders',
      deniedBy: 'orders',
      source: 'store',
      door: 'Allow',
      identity: { user: valueDigest('u1') },
      msg: 'denied',
    });
    expect(JSON.stringify(lines)).not.toContain('"u1"');
  });

  it('writes nothing when the level is above info', async () => {
    const { log, lines } = denialLog('warn');
    log.denied('Allow', 'orders', 'orders', 'store', { user: 'u1' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines).toEqual([]);
  });
});
