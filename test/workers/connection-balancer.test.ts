import type { Worker } from 'node:cluster';
import { lookup } from 'node:dns/promises';
import { EventEmitter } from 'node:events';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CONNECTION, CONNECTION_CLOSED, ConnectionBalancer } from '../../src/workers/connection-balancer.js';

/** A worker as the primary sees it: it receives connections (their sockets) and reports them closed. */
class FakeWorker extends EventEmitter {
  readonly received: Socket[] = [];
  send(message: { type: string }, socket: Socket, sent: (error: Error | null) => void): boolean {
    expect(message).toEqual({ type: CONNECTION });
    this.received.push(socket);
    // As Node does once a handle went to the worker: the primary's copy closes.
    socket.destroy();
    sent(null);
    return true;
  }
  /** The worker says `n` of its connections closed. */
  closed(n: number): void {
    for (let i = 0; i < n; i++) this.emit('message', { type: CONNECTION_CLOSED });
  }
}

const asWorker = (fake: FakeWorker) => fake as unknown as Worker;
const opened: Socket[] = [];
let balancer: ConnectionBalancer | undefined;

afterEach(async () => {
  for (const socket of opened.splice(0)) socket.destroy();
  await balancer?.close();
  balancer = undefined;
});

async function start(): Promise<number> {
  balancer = new ConnectionBalancer((error) => {
    throw error;
  });
  return balancer.listen('127.0.0.1:0');
}

function open(port: number, n: number): void {
  for (let i = 0; i < n; i++) opened.push(connect(port, '127.0.0.1'));
}

/** Waits until the workers together were handed `total` connections, then how many each got. */
async function handedOut(workers: FakeWorker[], total: number): Promise<number[]> {
  await vi.waitFor(() => expect(workers.reduce((sum, worker) => sum + worker.received.length, 0)).toBe(total));
  return workers.map((worker) => worker.received.length);
}

describe('the primary hands each gRPC connection to the worker serving the fewest', () => {
  it('a burst splits evenly, and new connections go to the worker whose connections closed', async () => {
    const port = await start();
    const [a, b] = [new FakeWorker(), new FakeWorker()];
    balancer!.add(asWorker(a));
    balancer!.add(asWorker(b));
    open(port, 6);
    expect(await handedOut([a, b], 6)).toEqual([3, 3]);
    // Two of a's three close: the next two connections are a's, then they alternate again.
    a.closed(2);
    open(port, 2);
    expect(await handedOut([a, b], 8)).toEqual([5, 3]);
    open(port, 2);
    expect(await handedOut([a, b], 10)).toEqual([6, 4]);
  });

  it('connections that come before any worker is ready wait for the first; a worker removed gets none', async () => {
    const port = await start();
    open(port, 2);
    const [a, b] = [new FakeWorker(), new FakeWorker()];
    // Accepted and held: nobody to hand them to yet.
    await vi.waitFor(() => expect(opened.every((socket) => socket.readyState === 'open')).toBe(true));
    balancer!.add(asWorker(a));
    expect(await handedOut([a], 2)).toEqual([2]);
    balancer!.add(asWorker(b));
    balancer!.remove(asWorker(a));
    open(port, 3);
    expect(await handedOut([a, b], 5)).toEqual([2, 3]);
  });

  it('a host name is bound on every address it resolves to, on one port, as grpc-js binds it', async () => {
    balancer = new ConnectionBalancer((error) => {
      throw error;
    });
    const port = await balancer.listen('localhost:0');
    const addresses = await lookup('localhost', { all: true });
    const a = new FakeWorker();
    balancer.add(asWorker(a));
    for (const { address } of addresses) opened.push(connect(port, address));
    expect(await handedOut([a], addresses.length)).toEqual([addresses.length]);
  });

  it('a port in use is refused when binding, with the system error', async () => {
    const port = await start();
    const second = new ConnectionBalancer(() => {});
    await expect(second.listen(`127.0.0.1:${port}`)).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });
});
