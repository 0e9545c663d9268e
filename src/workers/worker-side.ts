import cluster from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';

/** The message a worker sends its primary once it listens: from then on its death is a crash, not a failed start. */
export const WORKER_STARTED = 'quota-service:worker-started';

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
