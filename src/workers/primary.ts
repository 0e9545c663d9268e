import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, Counter, Registry } from 'prom-client';
import { listenNamed } from '../listen-error.js';
import type { Logger } from '../logger.js';
import { type MetricsServer, startMetricsServer } from '../metrics/metrics-server.js';
import { armShutdownDeadline } from '../shutdown-deadline.js';
import { ConnectionBalancer } from './connection-balancer.js';
import { CRASH_LOOP, CrashLoopGuard } from './crash-loop-guard.js';
import { PRIMARY_PORT, WORKER_STARTED } from './worker-side.js';

export interface PrimaryOptions {
  /** How many service processes to run (above 1: below that there is no primary). */
  workers: number;
  /** QUOTA_SHUTDOWN_GRACE_MS: each worker drains within it; the primary's hard deadline is it plus the margin. */
  graceMs: number;
  /** QUOTA_GRPC_ADDR: bound here; each connection goes to the worker serving the fewest (connection-balancer.ts). */
  grpcAddress: string;
  /** QUOTA_METRICS_ADDR: served here, summing every worker's metrics; the workers bind no metrics port. */
  metricsAddr?: string | undefined;
  logger: Logger;
}

/**
 * The primary of QUOTA_WORKERS service processes (Node's cluster module): it binds the
 * gRPC port and hands each connection to the worker serving the fewest (the health-only
 * port, if any, the workers share through the cluster module, which hands its connections
 * out in turn); it serves one metrics endpoint summing theirs; it stops them all on
 * SIGTERM or SIGINT, first closing the port. It decides nothing itself.
 *
 * A worker that exits before it started (a bad file, a port in use) ends the whole service
 * with exit code 1, as a single process would. A worker that dies later is replaced, up to
 * CRASH_LOOP.restarts times within CRASH_LOOP.windowMs; the next death within the window
 * stops every worker and exits 1, so the orchestrator sees the crash loop.
 */
export async function runPrimary(options: PrimaryOptions): Promise<void> {
  const { logger, graceMs } = options;
  const live = new Map<number, Worker>();
  const started = new Set<number>();
  const guard = new CrashLoopGuard(Date.now);
  const own = new Registry();
  const restarts = new Counter({
    name: 'quota_worker_restarts_total',
    help: 'Workers the primary started again after one exited unexpectedly.',
    registers: [own],
  });
  const aggregator = new AggregatorRegistry();
  const balancer = new ConnectionBalancer((error) => logger.warn({ err: error.message }, 'a connection could not be accepted'));
  let metricsServer: MetricsServer | undefined;
  let stopping = false;
  let exitCode = 0;
  let allStartedOnce = false;

  const finish = async () => {
    await metricsServer?.close();
    logger.info({ exitCode }, exitCode === 0 ? 'all workers stopped' : 'all workers stopped after a failure');
    process.exit(exitCode);
  };
  const stop = (reason: string, code: number) => {
    if (stopping) return;
    stopping = true;
    exitCode = code;
    // Whatever hangs, the primary ends in time; its workers follow when their channel to it closes.
    armShutdownDeadline(graceMs);
    logger.info({ reason, graceMs, workers: [...live.values()].map((worker) => worker.process.pid) }, 'shutting down: stopping every worker');
    void balancer.close();
    for (const worker of live.values()) worker.process.kill('SIGTERM');
    if (live.size === 0) void finish();
  };
  const fork = () => {
    const worker = cluster.fork({ [PRIMARY_PORT]: String(port) });
    live.set(worker.id, worker);
    worker.on('message', (message: unknown) => {
      if ((message as { type?: unknown } | null)?.type !== WORKER_STARTED) return;
      started.add(worker.id);
      balancer.add(worker);
      if (!allStartedOnce && started.size === options.workers) {
        allStartedOnce = true;
        logger.info({ workers: [...live.values()].map((each) => each.process.pid) }, 'all workers listening');
      }
    });
  };

  cluster.on('exit', (worker, code, signal) => {
    live.delete(worker.id);
    balancer.remove(worker);
    const wasStarted = started.delete(worker.id);
    const exit = { pid: worker.process.pid, code, signal };
    if (stopping) {
      // Ended by our SIGTERM before its handler was installed (still starting): it had nothing to drain.
      if (code !== 0 && signal !== 'SIGTERM') exitCode = 1;
      if (live.size === 0) void finish();
      return;
    }
    if (!wasStarted) {
      logger.error(exit, 'a worker exited before it started: stopping every worker');
      stop('a worker could not start', 1);
    } else if (guard.exited()) {
      restarts.inc();
      logger.error(exit, 'a worker exited unexpectedly: starting a replacement');
      fork();
    } else {
      logger.error(
        { ...exit, restarts: CRASH_LOOP.restarts, windowMs: CRASH_LOOP.windowMs },
        'a worker exited unexpectedly once more than the restarts allowed within the window (a crash loop): stopping every worker',
      );
      stop('crash loop', 1);
    }
  });
  process.on('SIGTERM', () => stop('SIGTERM', 0));
  process.on('SIGINT', () => stop('SIGINT', 0));

  const port = await listenNamed('QUOTA_GRPC_ADDR', options.grpcAddress, () => balancer.listen(options.grpcAddress));

  if (options.metricsAddr !== undefined) {
    const addr = options.metricsAddr;
    // Every worker's registry summed (each metric by its aggregator: counters and histograms summed), then the primary's own.
    const source = {
      contentType: aggregator.contentType,
      metrics: async () => `${await aggregator.clusterMetrics()}\n${await own.metrics()}`,
    };
    metricsServer = await listenNamed('QUOTA_METRICS_ADDR', addr, () => startMetricsServer(addr, source));
    logger.info({ addr, port: metricsServer.port, summing: 'every worker' }, 'metrics at GET /metrics');
  }
  logger.info({ workers: options.workers, addr: options.grpcAddress, port }, `starting ${options.workers} workers on one port`);
  for (let i = 0; i < options.workers; i++) fork();
}
