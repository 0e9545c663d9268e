import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startFaultProxy, type FaultProxy } from './fault-proxy.js';

/** A line echo server: each line comes back as it was sent. */
async function echoServer(): Promise<Server> {
  const server = createServer((socket) => socket.pipe(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return server;
}

/** A client that sends one line and waits for it to come back, one at a time. */
async function lineClient(port: number): Promise<{ roundTrip(line: string): Promise<{ line: string; ms: number }>; socket: Socket }> {
  const socket = connect({ host: '127.0.0.1', port });
  socket.setNoDelay(true);
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  let buffered = '';
  let waiting: ((line: string) => void) | undefined;
  socket.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const end = buffered.indexOf('\n');
    if (end >= 0 && waiting !== undefined) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
      const done = waiting;
      waiting = undefined;
      done(line);
    }
  });
  return {
    socket,
    async roundTrip(line) {
      const started = performance.now();
      const answer = await new Promise<string>((resolve) => {
        waiting = resolve;
        socket.write(`${line}\n`);
      });
      return { line: answer, ms: performance.now() - started };
    },
  };
}

/** A fixed sequence of "random" numbers, repeated. */
const sequence = (values: number[]) => {
  let i = 0;
  return () => values[i++ % values.length]!;
};

let server: Server | undefined;
let proxy: FaultProxy | undefined;
afterEach(async () => {
  await proxy?.close();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = proxy = undefined;
});

async function setUp(random?: () => number) {
  server = await echoServer();
  proxy = await startFaultProxy({ targetHost: '127.0.0.1', targetPort: (server.address() as AddressInfo).port, ...(random ? { random } : {}) });
  return lineClient(proxy.port);
}

describe('fault proxy', () => {
  it('passes bytes both ways unchanged', async () => {
    const client = await setUp();
    expect((await client.roundTrip('hello')).line).toBe('hello');
    const big = 'x'.repeat(200_000);
    expect((await client.roundTrip(big)).line).toBe(big);
    client.socket.destroy();
  });

  it('latency: every answer arrives that much later', async () => {
    const client = await setUp();
    proxy!.setFaults({ latencyMs: 60 });
    for (let i = 0; i < 5; i++) expect((await client.roundTrip(`l${i}`)).ms).toBeGreaterThanOrEqual(59);
    proxy!.setFaults({});
    // Back to no delay: the round trip is far below the latency it had (loopback: well under a millisecond; a loaded machine: more).
    expect((await client.roundTrip('fast')).ms).toBeLessThan(59);
    client.socket.destroy();
  });

  it('loss: a lost chunk arrives a retransmission timeout late, and what follows it waits (in order)', async () => {
    // Draws: the request of the first round trip is lost, then nothing, in either direction.
    const client = await setUp(sequence([0.05, 0.9, 0.9, 0.9, 0.9, 0.9]));
    proxy!.setFaults({ lossRate: 0.1, retransmitMs: 150 });
    expect((await client.roundTrip('one')).ms).toBeGreaterThanOrEqual(149);
    expect(proxy!.lost).toEqual({ toTarget: 1, toClient: 0 });
    expect((await client.roundTrip('two')).ms).toBeLessThan(149);
    expect((await client.roundTrip('three')).ms).toBeLessThan(149);

    // Two lines written back to back, the first lost: both arrive, in order, after the delay.
    const lines: string[] = [];
    const started = performance.now();
    const both = new Promise<void>((resolve) => {
      client.socket.on('data', (chunk: Buffer) => {
        lines.push(...chunk.toString().split('\n').filter(Boolean));
        if (lines.length >= 2) resolve();
      });
    });
    // The sequence comes round again: 'first' is lost; 'second', written while it is held, is not.
    client.socket.write('first\n');
    await new Promise((resolve) => setTimeout(resolve, 30));
    client.socket.write('second\n');
    await both;
    expect(lines).toEqual(['first', 'second']);
    expect(performance.now() - started).toBeGreaterThanOrEqual(149);
    client.socket.destroy();
  });

  it('stall: nothing moves until resumed, then everything arrives in order', async () => {
    const client = await setUp();
    proxy!.stall();
    const answer = client.roundTrip('held');
    let arrived = false;
    void answer.then(() => (arrived = true));
    // Long enough for an echo over loopback to have come back many times over.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(arrived).toBe(false);
    proxy!.resume();
    expect((await answer).line).toBe('held');
    client.socket.destroy();
  });

  it('close: stops listening and ends the connections it carries', async () => {
    const client = await setUp();
    const port = proxy!.port;
    const closed = new Promise<void>((resolve) => client.socket.once('close', () => resolve()));
    await proxy!.close();
    proxy = undefined;
    await closed;
    const refused = connect({ host: '127.0.0.1', port });
    await expect(new Promise((_, reject) => refused.once('error', reject))).rejects.toThrow(/ECONNREFUSED/);
  });
});
