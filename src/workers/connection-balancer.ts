import type { Worker } from 'node:cluster';
import { lookup } from 'node:dns/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { splitHostPort } from '../config/host-port.js';

/** The primary's message that hands a worker a connection (the socket goes with it). */
export const CONNECTION = 'quota-service:connection';
/** A worker's message: one of the connections it was handed has closed. */
export const CONNECTION_CLOSED = 'quota-service:connection-closed';

/**
 * The gRPC port of QUOTA_WORKERS processes, held by the primary: it accepts
 * each connection without reading from it and hands it to the worker serving
 * the fewest connections (of those equal, the one ready first), which serves
 * it whole (TLS included). gRPC callers hold few connections for a long time
 * (Envoy one or a few per thread, the quota client one per channel): handed
 * out in turn as Node's cluster module does, a burst of four could leave
 * three on one worker and one on the other for good. Connections that come
 * before any worker is ready wait for the first.
 */
export class ConnectionBalancer {
  /** One per address the host resolves to (as grpc-js binds them: `localhost` is 127.0.0.1 and ::1). */
  private readonly servers: Server[] = [];
  /** Open connections of each ready worker, in the order they got ready. */
  private readonly open = new Map<Worker, number>();
  private readonly waiting: Socket[] = [];

  constructor(private readonly onAcceptError: (error: Error) => void) {}

  /**
   * Binds `address` (host:port, as QUOTA_GRPC_ADDR) on every address its host
   * resolves to, all on one port (port 0: the one the first got); resolves
   * with that port once one bound, rejects with the first error if none did.
   */
  async listen(address: string): Promise<number> {
    const { host, port: asked } = splitHostPort(address);
    let port = asked;
    const resolved = await lookup(host, { all: true });
    const errors: unknown[] = [];
    for (const { address: ip } of resolved) {
      try {
        port = await this.bind(ip, port);
      } catch (error) {
        errors.push(error);
      }
    }
    if (this.servers.length === 0) throw errors[0];
    return port;
  }

  private bind(host: string, port: number): Promise<number> {
    const server = createServer({ pauseOnConnect: true }, (socket) => this.handOff(socket));
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host, port }, () => {
        server.off('error', reject);
        // Past listen, an error is one connection the kernel could not hand over (EMFILE, say): the port keeps serving.
        server.on('error', this.onAcceptError);
        this.servers.push(server);
        resolve((server.address() as { port: number }).port);
      });
    });
  }

  /** A worker ready to serve: connections go to it from now on. */
  add(worker: Worker): void {
    this.open.set(worker, 0);
    worker.on('message', (message: unknown) => {
      const count = this.open.get(worker);
      if ((message as { type?: unknown } | null)?.type === CONNECTION_CLOSED && count !== undefined) this.open.set(worker, Math.max(0, count - 1));
    });
    for (const socket of this.waiting.splice(0)) this.handOff(socket);
  }

  /** A worker gone: its connections went with it, and no more go to it. */
  remove(worker: Worker): void {
    this.open.delete(worker);
  }

  /** Stops accepting; the connections handed out stay with their workers. */
  async close(): Promise<void> {
    for (const socket of this.waiting.splice(0)) socket.destroy();
    await Promise.all(this.servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
  }

  private handOff(socket: Socket): void {
    let chosen: Worker | undefined;
    let fewest = Number.POSITIVE_INFINITY;
    for (const [worker, count] of this.open) {
      if (count < fewest) {
        chosen = worker;
        fewest = count;
      }
    }
    if (chosen === undefined) {
      this.waiting.push(socket);
      return;
    }
    const worker = chosen;
    this.open.set(worker, fewest + 1);
    worker.send({ type: CONNECTION }, socket, (error: Error | null) => {
      if (error === null) return;
      // The worker is going away: the caller connects again, and that connection goes elsewhere.
      const count = this.open.get(worker);
      if (count !== undefined) this.open.set(worker, Math.max(0, count - 1));
      socket.destroy();
    });
  }
}
