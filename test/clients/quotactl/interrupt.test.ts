import { createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { quotactl } from '../../support/quotactl.js';

// Ctrl-C during a call that gets no answer: quotactl stops at once with 130,
// rather than waiting out --timeout.

describe('quotactl interrupted', () => {
  // Accepts connections and never answers: a call to it waits.
  const sockets: Socket[] = [];
  let connected: () => void = () => {};
  const silent = createServer((socket) => {
    sockets.push(socket);
    connected();
  });
  let address = '';
  beforeAll(async () => {
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    address = `127.0.0.1:${(silent.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it.each([['allow', 'daily', 'user=1'], ['peek', 'daily', 'user=1'], ['policies']])('%s: exit 130 at Ctrl-C, not at --timeout', async (...args) => {
    const interrupt = new AbortController();
    connected = () => interrupt.abort();
    const started = performance.now();
    const { code, stdout, stderr } = await quotactl(['--addr', address, '--timeout', '600000', ...args], { interrupt: interrupt.signal });
    expect({ code, stdout, stderr }).toEqual({ code: 130, stdout: '', stderr: 'quotactl: interrupted\n' });
    expect(performance.now() - started).toBeLessThan(60_000);
  });
});
