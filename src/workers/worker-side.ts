import cluster from 'node:cluster';
import { Socket } from 'node:net';
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { InjectedConnections } from '../grpc/server.js';
import { CONNECTION, CONNECTION_CLOSED } from './connection-balancer.js';

/** The message a worker sends its primary once it listens: from then on its death is a crash, not a failed start. */
export const WORKER_STARTED = 'quota-service:worker-started';

/**
 * How the primary tells its workers the port it accepts connections on. Not a
 * setting, and outside the QUOTA_ names on purpose: the configuration would
 * take it for an unknown one (and QUOTA_STRICT_ENV refuse to start).
 */
export const PRIMARY_PORT = 'QUOTASERVICE_PRIMARY_PORT';

/** True in a worker forked by the primary (src/workers/primary.ts). */
export const isWorker = cluster.isWorker;

/** This worker's number (1, 2, ...; a replacement gets the next one), undefined outside a worker. */
export const workerNumber = cluster.worker?.id;

/** In a worker: answer the primary's metrics requests from this registry (prom-client's AggregatorRegistry protocol). */
export function shareMetrics(registry: Registry): void {
  if (!isWorker) return;
  // prom-client answers the primary's requests from the listener its constructor installs in a worker.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([registry]);
}

/** In a worker: tell the primary this worker listens. */
export function reportStarted(): void {
  if (isWorker) process.send?.({ type: WORKER_STARTED });
}

/**
 * In a worker: the port the primary accepts connections on, and how this
 * worker serves those it is handed (src/workers/connection-balancer.ts),
 * telling the primary when each closes. Undefined outside a worker.
 */
export function primaryConnections(): InjectedConnections | undefined {
  const port = Number(process.env[PRIMARY_PORT]);
  if (!isWorker || !Number.isInteger(port)) return undefined;
  return {
    port,
    receive(inject) {
      process.on('message', (message: unknown, handle: unknown) => {
        if ((message as { type?: unknown } | null)?.type !== CONNECTION || !(handle instanceof Socket)) return;
        // Not once the primary is gone (this worker is going too): a send on a closed channel is an error event.
        handle.once('close', () => {
          if (process.connected) process.send?.({ type: CONNECTION_CLOSED }, undefined, {}, () => {});
        });
        inject(handle);
      });
    },
  };
}
