import type { Worker } from 'node:cluster';
import { createServer, type Server, type Socket } from 'node:net';

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
  private readonly server: Server;
  /** Open connections of each ready worker, in the order they got ready. */
  private readonly open = new Map<Worker, number>();
  private readonly waiting: Socket[] = [];

  constructor(onAcceptError: (error: Error) => void) {
    this.server = createServer({ pauseOnConnect: true }, (socket) => this.handOff(socket));
    // Past listen, an error is one connection the kernel could not hand over (EMFILE, say): the port keeps serving.
    this.server.on('error', (error) => {
      if (this.server.listening) onAcceptError(error);
    });
  }

  /** Binds `address` (host:port, as QUOTA_GRPC_ADDR); resolves with the port bound. */
  listen(address: string): Promise<number> {
    const at = address.lastIndexOf(':');
    const host = address.slice(0, at).replace(/^\[(.*)\]$/, '$1');
    const port = Number(address.slice(at + 1));
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ host, port }, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as { port: number }).port);
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
  close(): Promise<void> {
    for (const socket of this.waiting.splice(0)) socket.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
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
