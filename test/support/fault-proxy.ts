import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy that makes a link slow, lossy or stalled, for tests and the
 * fault scenarios (bench/faults/run.ts). This kernel has no `tc netem`, and
 * Toxiproxy needs its own server binary, so the faults are made here, on the
 * byte stream between the service and Redis.
 *
 * What each fault means over TCP:
 * - latency: every answer (target -> client) is delivered `latencyMs` later,
 *   as Toxiproxy's latency toxic does by default: each round trip takes that
 *   much longer.
 * - loss: a proxy cannot drop a segment (it sees a byte stream; TCP below it
 *   would resend the segment anyway). What loss does to a TCP connection is
 *   delay: the lost segment is retransmitted after the retransmission timeout
 *   (200 ms at least on Linux), and every byte behind it waits, because TCP
 *   delivers in order. So a chunk is "lost" with probability `lossRate`, in
 *   either direction, and then it and everything after it on that direction
 *   arrive `retransmitMs` late.
 * - stall: nothing moves in either direction until resumed; then everything
 *   held arrives, in order (a link that hangs, not one that drops).
 */
export interface Faults {
  /** Added to every answer's delivery, ms. Default 0. */
  readonly latencyMs?: number;
  /** Probability that a chunk is lost (and retransmitted), 0..1. Default 0. */
  readonly lossRate?: number;
  /** How late a lost chunk arrives, ms. Default 200, Linux's minimum retransmission timeout. */
  readonly retransmitMs?: number;
}

export interface FaultProxy {
  /** The port the proxy listens on (127.0.0.1 unless given another host). */
  readonly port: number;
  readonly host: string;
  /** Applies from the next chunk on; chunks already held keep their delivery time. */
  setFaults(faults: Faults): void;
  /** Holds every byte in both directions until resume(). */
  stall(): void;
  resume(): void;
  /** Chunks lost (delayed by retransmitMs) so far, by direction. */
  readonly lost: { readonly toTarget: number; readonly toClient: number };
  /**
   * The most a chunk was delivered after its time, ms, outside stalls: how far
   * this process's own lateness (a busy CPU) added to the faults it was asked for.
   */
  readonly maxLateMs: number;
  /** Stops listening and closes every connection. */
  close(): Promise<void>;
}

export interface FaultProxyOptions {
  readonly targetHost: string;
  readonly targetPort: number;
  /** Where to listen; default 127.0.0.1 and a free port. */
  readonly host?: string;
  readonly port?: number;
  readonly faults?: Faults;
  /** The source of randomness for loss; Math.random unless a test wants a fixed sequence. */
  readonly random?: () => number;
}

export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  let faults: Faults = options.faults ?? {};
  let stalled = false;
  const random = options.random ?? Math.random;
  const lost = { toTarget: 0, toClient: 0 };
  const late = { maxMs: 0 };
  const pipes = new Set<DelayedPipe>();
  const sockets = new Set<Socket>();

  const server: Server = createServer((client) => {
    const target = connect({ host: options.targetHost, port: options.targetPort });
    client.setNoDelay(true);
    target.setNoDelay(true);
    sockets.add(client).add(target);
    const toTarget = new DelayedPipe(
      target,
      () => delayOf('toTarget'),
      () => stalled,
      late,
    );
    const toClient = new DelayedPipe(
      client,
      () => delayOf('toClient'),
      () => stalled,
      late,
    );
    pipes.add(toTarget).add(toClient);
    const teardown = () => {
      pipes.delete(toTarget);
      pipes.delete(toClient);
      sockets.delete(client);
      sockets.delete(target);
      client.destroy();
      target.destroy();
    };
    client.on('data', (chunk: Buffer) => toTarget.push(chunk));
    target.on('data', (chunk: Buffer) => toClient.push(chunk));
    // A side that ends ends the other once what it sent has been delivered.
    client.on('end', () => toTarget.end());
    target.on('end', () => toClient.end());
    client.on('close', teardown);
    target.on('close', teardown);
    client.on('error', teardown);
    target.on('error', teardown);
  });

  function delayOf(direction: 'toTarget' | 'toClient'): number {
    let delay = direction === 'toClient' ? (faults.latencyMs ?? 0) : 0;
    if ((faults.lossRate ?? 0) > 0 && random() < faults.lossRate!) {
      lost[direction]++;
      delay += faults.retransmitMs ?? 200;
    }
    return delay;
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    port: address.port,
    host: address.address,
    setFaults(next) {
      faults = next;
    },
    stall() {
      stalled = true;
    },
    resume() {
      stalled = false;
      for (const pipe of pipes) {
        pipe.resumedAt = performance.now();
        pipe.kick();
      }
    },
    lost,
    get maxLateMs() {
      return late.maxMs;
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

/**
 * One direction of a connection: chunks leave in the order they came, each
 * no earlier than its own delay allows and no earlier than the one before it
 * (TCP's in-order delivery: a late chunk holds up those behind it).
 */
class DelayedPipe {
  private readonly queue: { chunk: Buffer; due: number }[] = [];
  private lastDue = 0;
  private timer: NodeJS.Timeout | undefined;
  private ending = false;
  /** When the last stall ended: chunks held by it are not late by this process's doing. */
  resumedAt = 0;

  constructor(
    private readonly destination: Socket,
    private readonly delay: () => number,
    private readonly stalled: () => boolean,
    private readonly late: { maxMs: number },
  ) {}

  push(chunk: Buffer): void {
    const due = Math.max(performance.now() + this.delay(), this.lastDue);
    this.lastDue = due;
    this.queue.push({ chunk, due });
    this.kick();
  }

  end(): void {
    this.ending = true;
    this.kick();
  }

  /** Delivers what is due, and sets a timer for the next. */
  kick(): void {
    if (this.stalled()) return;
    const now = performance.now();
    while (this.queue.length > 0 && this.queue[0]!.due <= now) {
      const { chunk, due } = this.queue.shift()!;
      if (!this.destination.destroyed) this.destination.write(chunk);
      this.late.maxMs = Math.max(this.late.maxMs, now - Math.max(due, this.resumedAt));
    }
    if (this.queue.length === 0) {
      if (this.ending && !this.destination.destroyed) this.destination.end();
      return;
    }
    if (this.timer === undefined) {
      this.timer = setTimeout(
        () => {
          this.timer = undefined;
          this.kick();
        },
        Math.max(1, this.queue[0]!.due - now),
      );
    }
  }
}
